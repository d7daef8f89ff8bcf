"""One identity for an installed torch: its release, build variant and where it came from, with
the version pip compares.

An installed torch states its version twice, and the two disagree for PyPI's wheels: the
distribution's metadata (what pip compares and ``pip list`` shows) says ``2.15.0``, while
``torch/version.py`` (what ``torch.__version__`` prints) says ``2.15.0+cu132``. A wheel from the
PyTorch index says ``2.15.0+cu132`` in both. So the pair tells the build (release and variant,
from version.py) and the file's origin (a local label in pip's version: the PyTorch index's
naming; none: PyPI's), and ``direct_url.json`` names the file where pip was given it by path or
URL (cuda-pip pins PyPI's file so: its source is still PyPI's).

:class:`TorchIdentity` holds the pair's meaning; :func:`identity_from` makes it from the read
values (the target probe's report, a profile), :func:`read_installed_torch` from the files of a
search path (after an install, in a conda prefix). Detection, plans, locks, ``sync`` and the
conda plugin read torch's identity here, never by splitting a version string themselves.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Literal

from ._frozen import frozen
from .versions import CudaVersion

if TYPE_CHECKING:
    from .environment import TorchInfo

__all__ = [
    "TorchIdentity",
    "TorchSource",
    "identity_from",
    "identity_of",
    "read_installed_torch",
    "variant_of",
]

#: Where an installed torch's file came from, as its metadata tells: ``pypi`` (pip's version has
#: no local label: PyPI's file, or a mirror's copy of it), ``pytorch`` (a local label: the PyTorch
#: index's naming, or a folder of such files), ``unknown`` (no metadata to tell).
TorchSource = Literal["pypi", "pytorch", "unknown"]

_CUDA_LABEL = re.compile(r"cu(\d{2,3})")


def _local(version: str | None) -> str | None:
    return version.split("+", 1)[1] if version and "+" in version else None


def _release(version: str) -> str:
    return version.split("+", 1)[0]


@frozen
class TorchIdentity:
    """An installed torch build, and the version by which pip knows it."""

    release: str  # "2.15.0"
    variant: str | None  # "cu132", "cpu", "rocm6.2"; None: nothing tells
    cuda: CudaVersion | None  # torch.version.cuda (from version.py, else the label)
    pip_version: str | None  # the metadata's Version: "2.15.0" (PyPI) or "2.15.0+cu132"
    source: TorchSource
    url: str | None = None  # direct_url.json's URL: pip was given the file by path or URL
    installer: str | None = None  # the dist-info's INSTALLER: "pip", "uv", "conda"

    @property
    def label(self) -> str:
        """``2.15.0+cu132``: the build, as torch.__version__ prints it."""
        return f"{self.release}+{self.variant}" if self.variant else self.release

    @property
    def requirement(self) -> str:
        """What pip is given to keep or fetch this file: ``torch==<pip's version>``."""
        return f"torch=={self.pip_version or self.label}"

    def same_build(self, other: TorchIdentity) -> bool:
        """Same release and variant (a PyPI file and the PyPI index's file of one build are)."""
        return self.release == other.release and self.variant == other.variant

    def describe_source(self) -> str:
        """Where the file came from, in words."""
        if self.url is not None:
            return f"the file {self.url}"
        if self.source == "pypi":
            return f"PyPI's naming (pip's version {self.pip_version}, no local label)"
        if self.source == "pytorch":
            return (
                f"a file with a local label (pip's version {self.pip_version}): the PyTorch "
                "index's naming, or a folder of wheels such as a --find-links one"
            )
        return "unknown (no metadata)"


def variant_of(cuda: CudaVersion | None, hip: str | None, local: str | None) -> str | None:
    """The build variant: the local label where it names one, else ``cuNNN`` from the CUDA
    version, ``rocmX.Y`` from the HIP version, ``cpu`` when neither (None: nothing known)."""
    if local:
        return local
    if cuda is not None:
        return cuda.variant
    if hip:
        return "rocm" + ".".join(hip.split(".")[:2])
    return None


def _cuda(text: str | None) -> CudaVersion | None:
    if not text:
        return None
    try:
        return CudaVersion.parse(text)
    except ValueError:
        return None


def _url(direct_url: str | None) -> str | None:
    if not direct_url:
        return None
    try:
        data = json.loads(direct_url)
    except ValueError:
        return None
    url = data.get("url") if isinstance(data, dict) else None
    return url if isinstance(url, str) and url else None


def identity_from(
    *,
    version_py: Mapping[str, str | None] | None,
    metadata_version: str | None,
    direct_url: str | None = None,
    installer: str | None = None,
) -> TorchIdentity | None:
    """The identity of a torch whose ``torch/version.py`` holds ``version_py``'s fields
    (``__version__``, ``cuda``, ``hip``; None: no such file) and whose metadata says
    ``metadata_version`` (None: no metadata); ``direct_url`` is ``direct_url.json``'s text.
    None when neither tells a version."""
    fields = version_py or {}
    from_file = fields.get("__version__") or None
    version = from_file or metadata_version
    if not version:
        return None
    local = _local(from_file) or _local(metadata_version)
    cuda = _cuda(fields.get("cuda"))
    if cuda is None and local and (match := _CUDA_LABEL.fullmatch(local)):
        cuda = _cuda(match.group(0))
    if version_py is not None and not local and cuda is None and not fields.get("hip"):
        variant: str | None = "cpu"  # version.py says neither CUDA nor HIP: a CPU build
    else:
        variant = variant_of(cuda, fields.get("hip"), local)
    source: TorchSource
    if metadata_version is None:
        source = "unknown"
    else:
        source = "pytorch" if _local(metadata_version) else "pypi"
    return TorchIdentity(
        release=_release(version),
        variant=variant,
        cuda=cuda,
        pip_version=metadata_version,
        source=source,
        url=_url(direct_url),
        installer=installer or None,
    )


def identity_of(torch: TorchInfo) -> TorchIdentity:
    """The identity of a detected (or profiled) torch: ``torch.version`` is version.py's (the
    metadata's where there is no version.py), ``torch.pip_version`` the metadata's (None in a
    profile written before it was recorded: the source is then unknown)."""
    fields = {
        "__version__": torch.version,
        "cuda": str(torch.cuda) if torch.cuda else None,
        "hip": torch.hip,
    }
    found = identity_from(version_py=fields, metadata_version=torch.pip_version)
    assert found is not None  # torch.version is never empty
    return found


def _read(path: str, limit: int = 1024 * 1024) -> str | None:
    try:
        with open(path, "rb") as handle:
            return handle.read(limit).decode("utf-8", "replace")
    except OSError:
        return None


def read_installed_torch(search_path: Sequence[str]) -> TorchIdentity | None:
    """The identity of the torch the first entry of ``search_path`` holding one provides (as
    ``import torch`` and pip find it), read from its files without importing it; None: none."""
    from ._dist_metadata import installed_distributions
    from .detect._target_probe import parse_version_py

    version_py: dict[str, str | None] | None = None
    for directory in search_path:
        text = _read(os.path.join(directory, "torch", "version.py"))
        if text is not None:
            version_py = parse_version_py(text)
            break
    found = installed_distributions(list(search_path), lambda name: name == "torch").get("torch")
    metadata_version = found[1] if found else None
    meta = found[2] if found else None
    direct_url = installer = None
    if meta is not None and os.path.isdir(meta):
        direct_url = _read(os.path.join(meta, "direct_url.json"))
        installer = (_read(os.path.join(meta, "INSTALLER")) or "").strip() or None
    return identity_from(
        version_py=version_py,
        metadata_version=metadata_version,
        direct_url=direct_url,
        installer=installer,
    )
