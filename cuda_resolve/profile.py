"""Machine profiles: an :class:`~cuda_resolve.environment.Environment` saved as TOML.

A profile is written by ``cuda-resolve detect --save-profile FILE`` or by hand for a machine
class, and read by every command's ``--profile FILE``; resolving from one needs no probing.
The format is a public interface, documented in ``docs/profile-format.md``. Only
``python.version`` is required; unknown keys are errors that name the key.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path

from ._docs import doc_path
from .detect.host import normalize_arch
from .environment import (
    Compiler,
    Driver,
    Environment,
    ExtensionBinary,
    Gpu,
    InstalledExtension,
    Machine,
    NvidiaWheel,
    PythonInfo,
    Scheduler,
    Toolkit,
    TorchInfo,
    Variables,
)
from .errors import ProfileError
from .versions import ComputeCapability, CudaVersion, DriverVersion

TYPE_CHECKING = False  # typing's, without importing typing (issue 28)
if TYPE_CHECKING:  # the TOML reader is imported only when a profile is read
    from typing import Any

    from ._toml import Table
    from .index.cuda import CudaFactsSource

__all__ = [
    "dump_profile",
    "environment_from_dict",
    "environment_to_dict",
    "load_profile",
    "load_sbatch_resources",
    "parse_profile",
]

FORMAT_VERSION = 1
_HINT = (
    f"see {doc_path('profile-format.md')} for the profile keys, or write one with "
    "`cuda-resolve detect --save-profile FILE`"
)
_OSES = ("linux", "windows", "darwin")
_ARCHES = ("x86_64", "aarch64", "ppc64le", "arm64", "amd64")


def load_profile(path: str | Path, *, index: CudaFactsSource | None = None) -> Environment:
    """Read a profile file. ``index`` derives ``driver.cuda`` when absent (default: the shipped
    one)."""
    from ._toml import load_toml_file

    table = load_toml_file(Path(path), error=ProfileError, hint=_HINT)
    return _environment(table, source=str(path), index=index)


def parse_profile(
    text: str, *, origin: str = "<profile>", index: CudaFactsSource | None = None
) -> Environment:
    from ._toml import parse_toml_text

    table = parse_toml_text(text, origin=origin, error=ProfileError, hint=_HINT)
    return _environment(table, source=origin, index=index)


def environment_from_dict(
    data: dict[str, Any], *, origin: str, index: CudaFactsSource | None = None
) -> Environment:
    """The Environment :func:`environment_to_dict` wrote (inside a plan document, say)."""
    from ._toml import Table

    return _environment(
        Table(data, origin=origin, path="", error=ProfileError, hint=_HINT),
        source=origin,
        index=index,
    )


def _python_version(text: str) -> str:
    # 3.10, 3.10.12, and what pre-release interpreters report: 3.14.0rc2, 3.15.0a1+
    if not re.fullmatch(r"\d{1,4}\.\d{1,4}(\.\d{1,4})?((a|b|rc)\d{1,4})?\+?", text):
        raise ValueError("expected a Python version such as '3.10.12'")
    return text


def _compiler_version(text: str) -> str:
    # `gcc -dumpversion` prints "12" on Debian and "12.2.0" elsewhere
    parts = text.split(".")
    if not 1 <= len(parts) <= 3 or not all(part.isdigit() and len(part) <= 9 for part in parts):
        raise ValueError("expected a compiler version such as '11.4.0' or '12'")
    return text


def _torch_arch(text: str) -> str:
    # what torch.cuda.get_arch_list() prints: sm_86, sm_90a, compute_90 (PTX)
    if not re.fullmatch(r"(sm|compute)_\d{2,3}[af]?", text):
        raise ValueError(
            "expected an entry of torch.cuda.get_arch_list() such as 'sm_86' or 'compute_90'"
        )
    return text


def _glibc(text: str) -> str:
    parts = text.split(".")
    if len(parts) != 2 or not all(part.isdigit() and len(part) <= 9 for part in parts):
        raise ValueError("expected a glibc version such as '2.35'")
    return text


def _choice(options: tuple[str, ...]) -> Any:
    def check(text: str) -> str:
        if text not in options:
            raise ValueError(f"expected one of {', '.join(options)}")
        return text

    return check


def _environment(top: Table, *, source: str, index: CudaFactsSource | None) -> Environment:
    version = top.integer("format", FORMAT_VERSION)
    if not 1 <= version <= FORMAT_VERSION:
        from ._upgrade import upgrade_hint

        again = (
            "save the profile again with this version (cuda-resolve detect --save-profile FILE, "
            "on the machine it describes)"
        )
        raise top.fail(
            "format",
            f"= {version}: this cuda-resolve reads profile format {FORMAT_VERSION}",
            hint=f"{upgrade_hint()}, or {again}" if version > FORMAT_VERSION else again,
        )
    machine = _machine(top.table("machine"))
    python = _python(top.table("python", required=True))
    driver = _driver(top.table("driver"), index)
    gpus = tuple(_gpu(table, position) for position, table in enumerate(top.tables("gpu")))
    toolkits = tuple(_toolkit(table) for table in top.tables("toolkit"))
    compiler = _compiler(top.table("compiler"))
    torch = _torch(top.table("torch"))
    scheduler = _scheduler(top.table("scheduler"))
    variables = _variables(top.table("variables"))
    extensions = tuple(_extension(table) for table in top.tables("extension"))
    installed_extensions = tuple(
        _installed_extension(table) for table in top.tables("installed_extension")
    )
    notes = top.strings("notes", ())
    _sbatch_resources(
        top.table("slurm")
    )  # checked with the rest; `build --slurm` reads it (load_sbatch_resources)
    top.string("name", None)  # the machine class's name, which `lock` reads (lock/profiles.py)
    top.finish()
    return Environment(
        machine=machine,
        python=python,
        driver=driver,
        gpus=gpus,
        toolkits=toolkits,
        compiler=compiler,
        torch=torch,
        scheduler=scheduler,
        variables=variables,
        extensions=extensions,
        installed_extensions=installed_extensions,
        notes=notes,
        source=source,
    )


def _machine(table: Table | None) -> Machine:
    if table is None:
        return Machine()
    machine = Machine(
        os=table.parsed("os", _choice(_OSES), "linux"),
        # One spelling, as detection writes it (amd64 -> x86_64, arm64 -> aarch64): wheel tags,
        # wheelhouse keys and locks then agree with a machine that detected itself.
        arch=normalize_arch(table.parsed("arch", _choice(_ARCHES), "x86_64")),
        glibc=table.parsed("glibc", _glibc, None),
    )
    table.finish()
    return machine


def _python(table: Table | None) -> PythonInfo:
    assert table is not None
    python = PythonInfo(
        version=table.parsed("version", _python_version),
        implementation=table.parsed("implementation", _choice(("cpython", "pypy")), "cpython"),
        executable=table.string("executable", None),
        abi=table.string("abi", None),
        site_packages=table.strings("site_packages", ()),
        prefix=table.string("prefix", None),
        is_conda=table.boolean("conda", False),
        is_venv=table.boolean("venv", False),
    )
    table.finish()
    return python


def _driver(table: Table | None, index: CudaFactsSource | None) -> Driver | None:
    if table is None:
        return None
    version = table.parsed("version", DriverVersion.parse)
    cuda = table.parsed("cuda", CudaVersion.parse, None)
    source = table.string("source", "profile")
    table.finish()
    if index is None:
        from .index import default_cuda_facts

        index = default_cuda_facts()
    if cuda is None:
        from .compat import cuda_for_driver

        cuda = cuda_for_driver(version, index)
        if cuda is None:
            raise table.fail(
                "version",
                f"= {version.text!r}: cannot derive the CUDA version it supports",
                hint='add cuda = "12.2" to [driver]',
            )
    else:
        # A driver below its CUDA family's minimum cannot support that CUDA at all (a 535 driver
        # reporting CUDA 13.0 is a typo); a driver newer than the index knows may claim more.
        family = index.family(cuda.major)
        minimum = family.min_driver_linux if family is not None else None
        if minimum is not None and version < minimum:
            raise table.fail(
                "cuda",
                f"= '{cuda}': driver {version.text} cannot support CUDA {cuda.major}.x (that "
                f"needs driver >= {minimum})",
                hint="write the 'CUDA Version' nvidia-smi prints on that machine, or leave cuda "
                "out to derive it",
            )
    return Driver(version=version, cuda=cuda, source=source)


def _gpu(table: Table, position: int) -> Gpu:
    gpu = Gpu(
        index=table.integer("index", position),
        name=table.string("name", "unknown GPU"),
        compute_capability=table.parsed("compute_capability", ComputeCapability.parse),
        uuid=table.string("uuid", None),
        memory_mib=table.integer("memory_mib", None),
    )
    table.finish()
    return gpu


def _toolkit(table: Table) -> Toolkit:
    toolkit = Toolkit(
        version=table.parsed("version", CudaVersion.parse),
        root=table.string("root", None),
        nvcc=table.string("nvcc", None),
        release=table.string("release", None),
        gpu_archs=tuple(_capability_list(table, "gpu_archs")),
        missing_headers=table.strings("missing_headers", ()),
        found_via=table.string("found_via", "profile"),
        nvcc_on_path_wrapper=table.string("nvcc_on_path_wrapper", None),
    )
    table.finish()
    return toolkit


def _checked_strings(table: Table, key: str, check: Any) -> tuple[str, ...]:
    values: tuple[str, ...] = table.strings(key, ())
    for position, text in enumerate(values):
        try:
            check(text)
        except ValueError as exc:
            raise table.fail(f"{key}[{position}]", f"= {text!r}: {exc}") from None
    return values


def _capability_list(table: Table, key: str) -> list[ComputeCapability]:
    values = table.strings(key, ())
    result = []
    for position, text in enumerate(values):
        try:
            result.append(ComputeCapability.parse(text))
        except ValueError as exc:
            raise table.fail(f"{key}[{position}]", f"= {text!r}: {exc}") from None
    return result


def _compiler(table: Table | None) -> Compiler:
    if table is None:
        return Compiler()
    compiler = Compiler(
        gcc=table.parsed("gcc", _compiler_version, None),
        gxx=table.parsed("gxx", _compiler_version, None),
        clang=table.parsed("clang", _compiler_version, None),
        nvcc_host=table.string("nvcc_host", None),
        nvcc_host_version=table.parsed("nvcc_host_version", _compiler_version, None),
        other_gcc=_checked_strings(table, "other_gcc", _compiler_version),
    )
    table.finish()
    return compiler


def _torch(table: Table | None) -> TorchInfo | None:
    if table is None:
        return None
    version = table.string("version")
    try:
        from packaging.version import Version

        Version(version)
    except Exception:
        from ._toml import shown

        raise table.fail(
            "version", f"= {shown(version)}: not a valid version such as '2.1.0+cu121'"
        ) from None
    cuda = table.parsed("cuda", CudaVersion.parse, None)
    local = version.split("+", 1)[1] if "+" in version else None
    tagged: CudaVersion | None = None
    if local and re.fullmatch(r"cu\d{2,3}", local):
        tagged = CudaVersion.parse(local)
    if cuda is None:
        cuda = tagged
    elif (tagged is not None and tagged != cuda) or local == "cpu":
        built = f"a CUDA {tagged}" if tagged else "a CPU"
        raise table.fail(
            "cuda",
            f"= '{cuda}' but version {version!r} is {built} build",
            hint="torch.version.cuda matches the local tag; fix one of them",
        )
    torch = TorchInfo(
        version=version,
        cuda=cuda,
        hip=table.string("hip", None),
        git_version=table.string("git_version", None),
        cxx11_abi=table.boolean("cxx11_abi", None),
        arch_list=_checked_strings(table, "arch_list", _torch_arch)
        if "arch_list" in table
        else None,
        location=table.string("location", None),
        nvidia_wheels=tuple(_nvidia_wheel(t) for t in table.tables("nvidia_wheels")),
        torchvision=table.parsed("torchvision", _package_version, None),
        torchaudio=table.parsed("torchaudio", _package_version, None),
        pip_version=table.parsed("pip_version", _package_version, None),
    )
    build = table.parsed(
        "build", _choice(("cpu", "cuda", "rocm")), None
    )  # derived; written by dump_profile
    if build is not None and build != torch.build:
        need = {"cuda": 'cuda = "12.1"', "rocm": 'hip = "6.2"', "cpu": "neither cuda nor hip"}[
            build
        ]
        raise table.fail(
            "build",
            f"= {build!r} but the table describes a {torch.build} build",
            hint=f"a {build} build needs {need} in [torch]",
        )
    table.finish()
    return torch


def _package_version(text: str) -> str:
    from packaging.version import Version

    try:
        Version(text)
    except ValueError:  # InvalidVersion, or a part with thousands of digits
        raise ValueError("not a valid version such as '0.16.0+cu121'") from None
    return text


def _nvidia_wheel(table: Table) -> NvidiaWheel:
    wheel = NvidiaWheel(
        name=table.string("name"),
        version=table.string("version"),
        include_dir=table.string("include_dir", None),
        lib_dir=table.string("lib_dir", None),
    )
    table.finish()
    return wheel


def _extension(table: Table) -> ExtensionBinary:
    extension = ExtensionBinary(
        path=table.string("path"),
        needed=table.strings("needed", ()),
        missing=table.strings("missing", ()),
        sass=table.strings("sass", ()),
        ptx=table.strings("ptx", ()),
        missing_symbols=table.strings("missing_symbols", ()),
        demangled=table.strings("demangled", ()),
        distribution=table.string("distribution", None),
        notes=table.strings("notes", ()),
    )
    table.finish()
    for field in ("sass", "ptx"):
        for name in getattr(extension, field):
            try:
                ComputeCapability.parse(name)
            except ValueError as exc:
                raise table.fail(field, f"= {name!r}: {exc}") from None
    unknown = [name for name in extension.missing if name not in extension.needed]
    if unknown:
        raise table.fail("missing", f"= {unknown[0]!r} is not listed in needed")
    return extension


def _extension_to_dict(ext: ExtensionBinary) -> dict[str, Any]:
    """The facts doctor read from one extension; those it did not find are left out."""
    item: dict[str, Any] = {
        "path": ext.path,
        "needed": list(ext.needed),
        "missing": list(ext.missing),
    }
    for name in ("sass", "ptx", "missing_symbols", "demangled", "notes"):
        if getattr(ext, name):
            item[name] = list(getattr(ext, name))
    if ext.distribution is not None:
        item["distribution"] = ext.distribution
    return item


def _installed_extension(table: Table) -> InstalledExtension:
    # The version keeps its local label: "3.0.0+pt2141cu130.sm80" says what it was built for.
    installed = InstalledExtension(
        name=table.string("name"), version=table.parsed("version", _package_version)
    )
    table.finish()
    return installed


def _scheduler(table: Table | None) -> Scheduler:
    if table is None:
        return Scheduler()
    scheduler = Scheduler(
        slurm_job_id=table.string("slurm_job_id", None),
        slurm_variables=table.strings("slurm_variables", ()),
    )
    table.finish()
    return scheduler


def _sbatch_resources(table: Table | None) -> tuple[str, ...]:
    """``[slurm] sbatch = ["--partition=a100", ...]``: the sbatch options of this node class's
    build tasks under ``cuda-resolve build --slurm``."""
    if table is None:
        return ()
    from .slurm.resources import check_sbatch_arg

    options = _checked_strings(table, "sbatch", check_sbatch_arg)
    table.finish()
    return options


def load_sbatch_resources(path: str | Path) -> tuple[str, ...]:
    """The ``[slurm] sbatch`` options of a profile file (empty when it has none)."""
    from ._toml import load_toml_file

    table = load_toml_file(Path(path), error=ProfileError, hint=_HINT)
    return _sbatch_resources(table.table("slurm"))


def _variables(table: Table | None) -> Variables:
    if table is None:
        return Variables()
    variables = Variables(
        cuda_home=table.string("CUDA_HOME", None),
        cuda_path=table.string("CUDA_PATH", None),
        ld_library_path=table.string("LD_LIBRARY_PATH", None),
        torch_cuda_arch_list=table.string("TORCH_CUDA_ARCH_LIST", None),
        cuda_visible_devices=table.string("CUDA_VISIBLE_DEVICES", None),
    )
    table.finish()
    return variables


# -- writing --------------------------------------------------------------------------------


def _drop_empty(data: dict[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in data.items() if value not in (None, (), [], {})}


def environment_to_dict(env: Environment) -> dict[str, Any]:
    """The profile/JSON form of an Environment: plain strings, lists and tables."""
    data: dict[str, Any] = {"format": FORMAT_VERSION}
    data["machine"] = _drop_empty(
        {"os": env.machine.os, "arch": env.machine.arch, "glibc": env.machine.glibc}
    )
    py = env.python
    data["python"] = _drop_empty(
        {
            "version": py.version,
            "implementation": py.implementation,
            "executable": py.executable,
            "abi": py.abi,
            "site_packages": list(py.site_packages),
            "prefix": py.prefix,
            "conda": py.is_conda or None,
            "venv": py.is_venv or None,
        }
    )
    if env.driver:
        data["driver"] = {
            "version": env.driver.version.text,
            "cuda": str(env.driver.cuda),
            "source": env.driver.source,
        }
    if env.gpus:
        data["gpu"] = [
            _drop_empty(
                {
                    "index": gpu.index,
                    "name": gpu.name,
                    "compute_capability": str(gpu.compute_capability),
                    "uuid": gpu.uuid,
                    "memory_mib": gpu.memory_mib,
                }
            )
            for gpu in env.gpus
        ]
    if env.toolkits:
        data["toolkit"] = [
            _drop_empty(
                {
                    "version": str(tk.version),
                    "root": tk.root,
                    "nvcc": tk.nvcc,
                    "release": tk.release,
                    "gpu_archs": [str(cc) for cc in tk.gpu_archs],
                    "missing_headers": list(tk.missing_headers),
                    "found_via": tk.found_via,
                    "nvcc_on_path_wrapper": tk.nvcc_on_path_wrapper,
                }
            )
            for tk in env.toolkits
        ]
    compiler = _drop_empty(
        {
            "gcc": env.compiler.gcc,
            "gxx": env.compiler.gxx,
            "clang": env.compiler.clang,
            "nvcc_host": env.compiler.nvcc_host,
            "nvcc_host_version": env.compiler.nvcc_host_version,
            "other_gcc": list(env.compiler.other_gcc),
        }
    )
    if compiler:
        data["compiler"] = compiler
    if env.torch:
        torch = env.torch
        data["torch"] = _drop_empty(
            {
                "version": torch.version,
                "cuda": str(torch.cuda) if torch.cuda else None,
                "hip": torch.hip,
                "build": torch.build,
                "git_version": torch.git_version,
                "cxx11_abi": torch.cxx11_abi,
                "arch_list": list(torch.arch_list) if torch.arch_list is not None else None,
                "location": torch.location,
                "torchvision": torch.torchvision,
                "torchaudio": torch.torchaudio,
                "pip_version": torch.pip_version,
                "nvidia_wheels": [
                    _drop_empty(
                        {
                            "name": w.name,
                            "version": w.version,
                            "include_dir": w.include_dir,
                            "lib_dir": w.lib_dir,
                        }
                    )
                    for w in torch.nvidia_wheels
                ],
            }
        )
        if torch.arch_list == ():  # known to be empty (a CPU build), not unknown
            data["torch"]["arch_list"] = []
    scheduler = _drop_empty(
        {
            "slurm_job_id": env.scheduler.slurm_job_id,
            "slurm_variables": list(env.scheduler.slurm_variables),
        }
    )
    if scheduler:
        data["scheduler"] = scheduler
    variables = _drop_empty(
        {
            "CUDA_HOME": env.variables.cuda_home,
            "CUDA_PATH": env.variables.cuda_path,
            "LD_LIBRARY_PATH": env.variables.ld_library_path,
            "TORCH_CUDA_ARCH_LIST": env.variables.torch_cuda_arch_list,
            "CUDA_VISIBLE_DEVICES": env.variables.cuda_visible_devices,
        }
    )
    if variables:
        data["variables"] = variables
    if env.extensions:
        data["extension"] = [_extension_to_dict(ext) for ext in env.extensions]
    if env.installed_extensions:
        data["installed_extension"] = [
            {"name": ext.name, "version": ext.version} for ext in env.installed_extensions
        ]
    if env.notes:
        data["notes"] = list(env.notes)
    return data


#: What a user writes into a profile by hand and detect never writes (``name = "a100"``, read by
#: ``lock``; ``[slurm] sbatch``, read by ``build --slurm``): saving over the file keeps them.
HAND_WRITTEN = ("name", "slurm")


def hand_written(path: Path) -> dict[str, Any]:
    """The :data:`HAND_WRITTEN` entries of the profile at ``path`` (``{}`` when there is no
    such file or it cannot be read as TOML: saving then simply writes the new profile)."""
    from ._bounded import read_text
    from ._toml import parse_toml_text
    from .errors import CudaResolveError

    try:  # read_text: a FIFO or a device is refused before it is opened, never read
        data = parse_toml_text(
            read_text(path), origin=str(path), error=ProfileError, hint=_HINT
        ).data
    except (OSError, UnicodeDecodeError, CudaResolveError):
        return {}
    kept: dict[str, Any] = {}
    if isinstance(data.get("name"), str):
        kept["name"] = data["name"]
    if isinstance(data.get("slurm"), dict):
        kept["slurm"] = data["slurm"]
    return kept


def dump_profile(env: Environment, *, keep: Mapping[str, Any] | None = None) -> str:
    """The profile text of ``env``; ``keep``: the :func:`hand_written` entries of the file it
    replaces, carried over."""
    import tomli_w  # only saving a profile writes TOML

    header = "# cuda-resolve machine profile (format documented in docs/profile-format.md)\n"
    data = environment_to_dict(env)
    kept = dict(keep or {})
    if "name" in kept:
        data = {"name": kept["name"], **data}
    if "slurm" in kept:
        data["slurm"] = kept["slurm"]
    return header + tomli_w.dumps(data)
