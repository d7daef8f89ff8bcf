"""A built extension wheel converted into a ``.conda`` package whose record pins its ABI.

The package (decisions in docs/conda.md):

- **name**: the package's name as cuda-resolve's index spells it, lower-cased
  (``pointnet2_ops``, ``kaolin``): what a user types after ``conda install``;
- **version**: the wheel's release (``3.0.0``); the ABI is in the build string and the depends;
- **build string**: ``<python tag>_<torch digits + variant>_<arch words>_h<digest>_<number>``,
  for example ``cp311_pt2141cu130_sm80_sm90ptx_h1a2b3c4d_0``: the arch list is readable there
  (and :func:`~cuda_resolve.conda.serve.arch_list_of` reads it back), and the digest over the
  depends keeps two builds against two different torch records apart;
- **depends**: the exact torch record the environment has (``pytorch ==2.5.1 <build>`` from a
  channel, ``torch ==2.14.1+cu130 pypi_0`` from pip), ``__cuda >=<major>`` for a CUDA build
  (minor-version compatibility within a major family), and ``python >=3.11,<3.12.0a0`` where
  the environment's python is a conda package;
- **files**: the wheel's files under ``lib/pythonX.Y/site-packages`` (its ``.data`` folders where
  the wheel spec puts them), the dist-info's ``INSTALLER`` saying ``conda`` and its ``RECORD``
  left out, so pip refuses to uninstall what conda owns; ``info/cuda-resolve.json`` keeps the
  wheel key, the wheel's sha256 and the Requires-Dist entries that were not translated.

The ``.conda`` container is written by ``conda_package_handling`` (a dependency of conda itself;
imported only when a package is made).
"""

from __future__ import annotations

import email.parser
import hashlib
import json
import shlex
import shutil
import tempfile
import time
import zipfile
from collections.abc import Sequence
from pathlib import Path, PurePosixPath

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

from .._frozen import field, frozen
from ..errors import UsageError
from ..wheelhouse.key import WheelKey
from .records import CondaRecord, TorchRecord

__all__ = [
    "PLACEHOLDER",
    "CondaPackage",
    "package_for",
    "platform_subdir",
    "read_package_info",
    "wheel_to_conda",
]

#: The prefix placeholder conda and rattler replace in text files at install time.
PLACEHOLDER = "/opt/anaconda1anaconda2anaconda3"
_TORCH_NAMES = {"torch", "pytorch"}


def platform_subdir(platform_tag: str) -> str:
    """The conda subdir of a wheel platform tag (``manylinux_2_28_x86_64`` -> ``linux-64``)."""
    for suffix, subdir in (
        ("x86_64", "linux-64"),
        ("aarch64", "linux-aarch64"),
        ("ppc64le", "linux-ppc64le"),
    ):
        if platform_tag.startswith(("linux", "manylinux", "musllinux")) and platform_tag.endswith(
            suffix
        ):
            return subdir
    if platform_tag.startswith("win") and platform_tag.endswith("amd64"):
        return "win-64"
    raise UsageError(
        f"wheel platform {platform_tag!r} has no conda subdir cuda-resolve knows",
        hint="CUDA extensions are packaged for linux-64, linux-aarch64 and win-64",
    )


@frozen
class CondaPackage:
    """What the ``.conda`` file's ``info/index.json`` says, and where it came from."""

    name: str
    version: str
    build: str
    build_number: int
    depends: tuple[str, ...]
    subdir: str
    python_version: str  # "3.11": the site-packages folder
    key: WheelKey
    torch: TorchRecord
    extra: dict[str, object] = field(default_factory=dict)

    @property
    def filename(self) -> str:
        return f"{self.name}-{self.version}-{self.build}.conda"

    @property
    def arch_list(self) -> str:
        return self.key.arch_list

    def index_json(self, *, license_text: str | None, timestamp_ms: int) -> dict[str, object]:
        arch = {
            "linux-64": "x86_64",
            "linux-aarch64": "aarch64",
            "linux-ppc64le": "ppc64le",
            "win-64": "x86_64",
        }[self.subdir]
        data: dict[str, object] = {
            "name": self.name,
            "version": self.version,
            "build": self.build,
            "build_number": self.build_number,
            "depends": list(self.depends),
            "constrains": [],
            "subdir": self.subdir,
            "arch": arch,
            "platform": self.subdir.split("-")[0],
            "timestamp": timestamp_ms,
        }
        if license_text:
            data["license"] = license_text
        return data

    def record(self) -> CondaRecord:
        return CondaRecord(
            name=self.name,
            version=self.version,
            build=self.build,
            build_number=self.build_number,
            depends=self.depends,
            subdir=self.subdir,
            fn=self.filename,
        )


def _build_string(key: WheelKey, depends: Sequence[str], number: int) -> str:
    digest = hashlib.sha256("\n".join(sorted(depends)).encode()).hexdigest()[:8]
    return f"{key.python_tag}_{key.local_label.replace('.', '_')}_h{digest}_{number}"


def package_for(
    key: WheelKey,
    *,
    torch: TorchRecord,
    python: CondaRecord | None,
    python_version: str,
    build_number: int = 0,
) -> CondaPackage:
    """The package a wheel built with ``key`` against ``torch`` becomes in an environment whose
    python record is ``python`` (None when python is not a conda package there)."""
    if key.torch != torch.version.split("+", 1)[0]:
        raise UsageError(
            f"the wheel was built against torch {key.torch}, the environment has "
            f"{torch.describe()}",
            hint="build it against the environment's torch: conda cuda build "
            f"{shlex.quote(key.package)}",
        )
    depends = [torch.pin]
    if key.variant.startswith("cu"):
        digits = key.variant[2:]
        depends.append(f"__cuda >={int(digits[:-1])}")
    if python is not None:
        major, minor = (int(part) for part in python_version.split(".")[:2])
        depends.append(f"python >={major}.{minor},<{major}.{minor + 1}.0a0")
    name = key.package.lower()
    return CondaPackage(
        name=name,
        version=key.version,
        build=_build_string(key, depends, build_number),
        build_number=build_number,
        depends=tuple(depends),
        subdir=platform_subdir(key.platform),
        python_version=python_version,
        key=key,
        torch=torch,
    )


def _target(member: str, site_packages: str, python_version: str) -> str | None:
    """Where a wheel member goes in the prefix (the wheel spec's ``.data`` schemes)."""
    parts = PurePosixPath(member).parts
    if parts and parts[0].endswith(".data") and len(parts) >= 3:
        scheme, rest = parts[1], "/".join(parts[2:])
        return {
            "purelib": f"{site_packages}/{rest}",
            "platlib": f"{site_packages}/{rest}",
            "scripts": f"bin/{rest}",
            "data": rest,
            "headers": f"include/python{python_version}/{rest}",
        }.get(scheme)
    return f"{site_packages}/{member}"


def _metadata(wheel: zipfile.ZipFile) -> tuple[str, email.message.Message]:
    names = [
        name
        for name in wheel.namelist()
        if name.count("/") == 1 and name.endswith(".dist-info/METADATA")
    ]
    if len(names) != 1:
        raise UsageError(
            f"{wheel.filename}: not a wheel (it has {len(names)} .dist-info/METADATA files)",
            hint="it is no wheel a build writes: remove it and build the package again "
            "(cuda-resolve build NAME)",
        )
    return names[0].split("/")[0], email.parser.Parser().parsestr(
        wheel.read(names[0]).decode("utf-8")
    )


def _untranslated(metadata: email.message.Message) -> list[str]:
    """Requires-Dist entries other than torch's: conda names for PyPI projects are not known."""
    left = []
    for text in metadata.get_all("Requires-Dist") or []:
        try:
            requirement = Requirement(text)
        except InvalidRequirement:
            left.append(text)
            continue
        if canonicalize_name(requirement.name) not in _TORCH_NAMES and "extra" not in str(
            requirement.marker or ""
        ):
            left.append(text)
    return left


def _console_scripts(wheel: zipfile.ZipFile, dist_info: str) -> list[tuple[str, str]]:
    name = f"{dist_info}/entry_points.txt"
    if name not in wheel.namelist():
        return []
    import configparser

    parser = configparser.ConfigParser(delimiters=("=",))
    parser.optionxform = str  # type: ignore[assignment,method-assign]
    parser.read_string(wheel.read(name).decode("utf-8"))
    if not parser.has_section("console_scripts"):
        return []
    return [(script, target.strip()) for script, target in parser.items("console_scripts")]


def wheel_to_conda(
    wheel_path: Path,
    package: CondaPackage,
    out_dir: Path,
    *,
    extra_info: dict[str, object] | None = None,
) -> Path:
    """Write ``package`` (from the wheel at ``wheel_path``) as ``out_dir/<filename>``; returns
    it."""
    try:
        from conda_package_handling import api as cph  # type: ignore[import-untyped]
    except ImportError:
        raise UsageError(
            "writing a .conda package needs conda_package_handling, which is not installed here",
            hint="run this through conda (conda cuda ...), whose environment has it, or pip "
            "install conda-package-handling",
        ) from None
    site_packages = f"lib/python{package.python_version}/site-packages"
    out_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="cuda-resolve-conda-") as scratch:
        root = Path(scratch)
        paths: list[dict[str, object]] = []

        def add(
            relative: str, data: bytes, *, mode: int = 0o644, placeholder: bool = False
        ) -> None:
            destination = root / relative
            destination.parent.mkdir(parents=True, exist_ok=True)
            destination.write_bytes(data)
            destination.chmod(mode)
            entry: dict[str, object] = {
                "_path": relative,
                "path_type": "hardlink",
                "sha256": hashlib.sha256(data).hexdigest(),
                "size_in_bytes": len(data),
            }
            if placeholder:
                entry.update(file_mode="text", prefix_placeholder=PLACEHOLDER)
            paths.append(entry)

        with zipfile.ZipFile(wheel_path) as wheel:
            dist_info, metadata = _metadata(wheel)
            for member in wheel.infolist():
                if member.is_dir() or member.filename in (
                    f"{dist_info}/RECORD",
                    f"{dist_info}/INSTALLER",
                ):
                    continue
                relative = _target(member.filename, site_packages, package.python_version)
                if (
                    relative is None
                    or ".." in PurePosixPath(relative).parts
                    or relative.startswith("/")
                ):
                    raise UsageError(
                        f"{wheel_path.name}: member {member.filename!r} has no place in a "
                        "conda package",
                        hint="rebuild the wheel; it does not follow the wheel format",
                    )
                mode = (
                    0o755
                    if (member.external_attr >> 16) & 0o111 or relative.startswith("bin/")
                    else 0o644
                )
                add(relative, wheel.read(member), mode=mode)
            add(f"{site_packages}/{dist_info}/INSTALLER", b"conda\n")
            for script, target in _console_scripts(wheel, dist_info):
                module, _, function = target.partition(":")
                text = (
                    f"#!{PLACEHOLDER}/bin/python\nimport sys\nfrom {module} import "
                    f"{function.split('.')[0]}\n"
                    f"sys.exit({function}())\n"
                )
                add(f"bin/{script}", text.encode(), mode=0o755, placeholder=True)
            untranslated = _untranslated(metadata)
            license_text = metadata.get("License-Expression") or metadata.get("License")
            summary = metadata.get("Summary") or ""

        info = root / "info"
        info.mkdir()
        index = package.index_json(
            license_text=license_text if license_text and len(license_text) < 200 else None,
            timestamp_ms=int(time.time() * 1000),
        )
        (info / "index.json").write_text(json.dumps(index, indent=2, sort_keys=True))
        (info / "paths.json").write_text(
            json.dumps(
                {"paths": sorted(paths, key=lambda p: str(p["_path"])), "paths_version": 1},
                indent=2,
            )
        )
        (info / "files").write_text(
            "".join(f"{p['_path']}\n" for p in sorted(paths, key=lambda p: str(p["_path"])))
        )
        with_prefix = [p for p in paths if p.get("prefix_placeholder")]
        if with_prefix:
            (info / "has_prefix").write_text(
                "".join(f"{PLACEHOLDER} text {p['_path']}\n" for p in with_prefix)
            )
        (info / "about.json").write_text(
            json.dumps(
                {"summary": summary, "description": "built and converted by cuda-resolve"}, indent=2
            )
        )
        ours = {
            "wheel": wheel_path.name,
            "wheel_sha256": hashlib.sha256(wheel_path.read_bytes()).hexdigest(),
            "wheel_key": package.key.to_json(),
            "arch_list": package.arch_list,
            "torch": {
                "source": package.torch.source,
                "version": package.torch.version,
                "build": package.torch.build,
            },
            "requires_dist_not_translated": untranslated,
            **package.extra,
            **(extra_info or {}),
        }
        (info / "cuda-resolve.json").write_text(json.dumps(ours, indent=2, sort_keys=True))

        files = sorted(str(path.relative_to(root)) for path in root.rglob("*") if path.is_file())
        final = out_dir / package.filename
        with tempfile.TemporaryDirectory(dir=out_dir, prefix=".writing-") as staging:
            cph.create(str(root), files, package.filename, staging, compression_level=10)
            shutil.move(str(Path(staging) / package.filename), final)
    return final


def read_package_info(conda_file: Path) -> tuple[dict[str, object], dict[str, object]]:
    """``info/index.json`` and ``info/cuda-resolve.json`` of a ``.conda`` file (no extraction
    to disk: the info component is read as a stream)."""
    from conda_package_streaming.package_streaming import (  # type: ignore[import-untyped]
        CondaComponent,
        stream_conda_component,
    )

    index: dict[str, object] = {}
    ours: dict[str, object] = {}
    with conda_file.open("rb") as stream:
        for tar, member in stream_conda_component(str(conda_file), stream, CondaComponent.info):
            if member.name in ("info/index.json", "info/cuda-resolve.json"):
                handle = tar.extractfile(member)
                data = json.loads(handle.read()) if handle else {}
                (index if member.name == "info/index.json" else ours).update(data)
    return index, ours
