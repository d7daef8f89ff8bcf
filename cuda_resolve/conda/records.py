"""Package records as conda writes them (``info/index.json``, repodata entries, a prefix's
``conda-meta/*.json``) and the torch an environment has.

A conda environment's torch is either a channel's ``pytorch`` (its record in ``conda-meta``) or
pip's ``torch`` (a ``torch-*.dist-info`` that conda does not own). Their ABIs differ, so an
extension built against one must never be paired with the other: :class:`TorchRecord` keeps
which one it is, and :meth:`TorchRecord.pin` is the exact dependency a package built against it
carries.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Literal

from .._frozen import frozen
from ..errors import UsageError
from ..versions import CudaVersion
from .matchspec import MatchSpec, parse_spec

__all__ = [
    "PIP_BUILD",
    "CondaRecord",
    "TorchRecord",
    "pip_distribution",
    "read_prefix_records",
    "torch_record",
]

#: The build string conda gives a package pip installed (conda's own pypi prefix-data loader).
PIP_BUILD = "pypi_0"

_CUDA_BUILD = re.compile(r"(?:^|_)cuda_?(\d+)(\d)(?:_|$)")
_CPU_BUILD = re.compile(r"(?:^|_)cpu(?:_|$)")


def _strings(value: object, origin: str, field: str) -> tuple[str, ...]:
    if value is None:
        return ()
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise UsageError(
            f"{origin}: {field} must be a list of strings, not {value!r}",
            hint="the record was not written by conda or cuda-resolve; remove it or "
            "rebuild the package",
        )
    return tuple(value)


@frozen
class CondaRecord:
    """The fields of a package record that deciding needs."""

    name: str
    version: str
    build: str
    build_number: int = 0
    depends: tuple[str, ...] = ()
    constrains: tuple[str, ...] = ()
    subdir: str = ""
    fn: str = ""
    channel: str = ""
    url: str = ""  # where the package file came from (a prefix's records say)

    @classmethod
    def from_json(cls, data: Mapping[str, object], *, origin: str, fn: str = "") -> CondaRecord:
        """A record from parsed JSON; errors name ``origin`` and the field."""
        values: dict[str, str] = {}
        for field in ("name", "version", "build"):
            value = data.get(field)
            if not isinstance(value, str) or not value:
                raise UsageError(
                    f"{origin}: {field} must be a non-empty string, not {value!r}",
                    hint="the record was not written by conda or cuda-resolve; remove it or "
                    "rebuild the package",
                )
            values[field] = value
        number = data.get("build_number", 0)
        if not isinstance(number, int) or isinstance(number, bool):
            raise UsageError(
                f"{origin}: build_number must be an integer, not {number!r}",
                hint="the record was not written by conda or cuda-resolve; remove it or "
                "rebuild the package",
            )
        channel = data.get("channel", "")
        url = data.get("url", "")
        return cls(
            name=values["name"],
            version=values["version"],
            build=values["build"],
            build_number=number,
            depends=_strings(data.get("depends"), origin, "depends"),
            constrains=_strings(data.get("constrains"), origin, "constrains"),
            subdir=str(data.get("subdir", "")),
            fn=str(data.get("fn", fn) or fn),
            channel=channel if isinstance(channel, str) else "",
            url=url if isinstance(url, str) else "",
        )

    def dependency(self, name: str) -> list[MatchSpec]:
        """The ``depends`` entries on ``name``."""
        return [spec for spec in map(parse_spec, self.depends) if spec.name == name]

    def satisfies(self, spec: MatchSpec) -> bool:
        return spec.matches(self.name, self.version, self.build)


@frozen
class TorchRecord:
    """The torch an environment has: ``pytorch`` from a channel or ``torch`` from pip."""

    source: Literal["channel", "pip"]
    version: str  # as its record says: "2.5.1" (channel), "2.14.1+cu130" (pip)
    build: str  # the channel build string ("cuda126_generic_py312_h1234_300"), or pypi_0
    cuda: CudaVersion | None  # the CUDA it was built with; None for CPU builds

    @property
    def name(self) -> str:
        return "pytorch" if self.source == "channel" else "torch"

    @property
    def pin(self) -> str:
        """The exact dependency an extension built against this torch carries."""
        return f"{self.name} =={self.version} {self.build}"

    @property
    def is_cpu_only(self) -> bool:
        return self.cuda is None

    def describe(self) -> str:
        where = "a channel's pytorch" if self.source == "channel" else "pip's torch"
        variant = f"CUDA {self.cuda}" if self.cuda else "CPU-only"
        return f"{where} {self.version} ({self.build}, {variant})"

    @classmethod
    def from_channel_record(cls, record: CondaRecord) -> TorchRecord:
        return cls(
            source="channel",
            version=record.version,
            build=record.build,
            cuda=channel_torch_cuda(record),
        )


def channel_torch_cuda(record: CondaRecord) -> CudaVersion | None:
    """The CUDA a channel's pytorch build was made with: from its build string (conda-forge's
    ``cuda126_...``, ``cuda_130``) or its ``cuda-version`` dependency; None for CPU builds."""
    if _CPU_BUILD.search(record.build):
        return None
    match = _CUDA_BUILD.search(record.build)
    if match:
        return CudaVersion(int(match.group(1)), int(match.group(2)))
    for spec in record.dependency("cuda-version"):
        found = re.search(r"(\d+)\.(\d+)", spec.version)
        if found:
            return CudaVersion(int(found.group(1)), int(found.group(2)))
    return None


def read_prefix_records(prefix: Path) -> tuple[CondaRecord, ...]:
    """The records of the packages conda installed into ``prefix`` (its ``conda-meta``)."""
    meta = prefix / "conda-meta"
    records = []
    for path in sorted(meta.glob("*.json")) if meta.is_dir() else ():
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise UsageError(
                f"{path}: not a readable conda record ({exc})",
                hint="the environment's conda-meta is damaged; `conda doctor` checks it",
            ) from None
        if isinstance(data, dict):
            records.append(CondaRecord.from_json(data, origin=str(path), fn=path.name))
    return tuple(records)


@frozen
class PipDistribution:
    """A package pip installed into a prefix (not owned by conda)."""

    name: str
    version: str
    dist_info: Path
    site_packages: Path


def _site_packages(prefix: Path) -> list[Path]:
    return sorted(prefix.glob("lib/python3*/site-packages")) + sorted(
        prefix.glob("Lib/site-packages")
    )


def pip_distribution(prefix: Path, name: str) -> PipDistribution | None:
    """``name``'s dist-info in ``prefix`` when pip (not conda) installed it."""
    wanted = name.lower().replace("-", "_")
    for site in _site_packages(prefix):
        for dist_info in sorted(site.glob("*.dist-info")):
            stem = dist_info.name[: -len(".dist-info")]
            project, _, version = stem.partition("-")
            if project.lower().replace("-", "_") != wanted or not version:
                continue
            installer = dist_info / "INSTALLER"
            try:
                by = installer.read_text(encoding="utf-8").strip() if installer.is_file() else ""
            except OSError:
                by = ""
            if by == "conda":
                continue
            return PipDistribution(
                name=name, version=version, dist_info=dist_info, site_packages=site
            )
    return None


def _pip_torch_cuda(distribution: PipDistribution) -> CudaVersion | None:
    """torch.version.cuda read from the files (importing torch takes seconds): the one reader
    of an installed torch's build (:mod:`cuda_resolve.torch_identity`)."""
    from ..torch_identity import read_installed_torch

    found = read_installed_torch([str(distribution.site_packages)])
    return found.cuda if found is not None else None


def torch_record(prefix: Path, records: Sequence[CondaRecord] | None = None) -> TorchRecord | None:
    """The torch ``prefix`` has: the channel's ``pytorch`` record first (conda owns it), else
    pip's ``torch``; None when there is neither."""
    for record in read_prefix_records(prefix) if records is None else records:
        if record.name == "pytorch":
            return TorchRecord.from_channel_record(record)
    distribution = pip_distribution(prefix, "torch")
    if distribution is None:
        return None
    return TorchRecord(
        source="pip",
        version=distribution.version,
        build=PIP_BUILD,
        cuda=_pip_torch_cuda(distribution),
    )
