"""Build what a conda environment needs into the local channel: the one action behind the conda
plugin's install path (``conda install pointnet2_ops`` with the plugin active).

The environment's torch is what the build pairs with (a channel's ``pytorch`` or pip's ``torch``);
the builds go through the existing build path (:func:`cuda_resolve.install.run.build_only`,
wheelhouse hits included); each wheel becomes a ``.conda`` package whose record pins that torch
record and ``__cuda``; conda's own solver and transaction then install it (nothing here installs
anything into the environment). A prebuilt wheel the plan takes instead (kaolin from NVIDIA's
find-links pages) is downloaded, checked against the sha256 its page lists
(:mod:`cuda_resolve.conda.fetch`), and converted the same way, with the same pins.
"""

from __future__ import annotations

import copy
import os
import sys
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path

from .._frozen import frozen
from ..environment import Environment
from ..errors import CudaResolveError, UsageError
from ..index.model import Index
from ..install.options import InstallOptions
from ..net.client import HttpClient
from ..plan import Plan, PlanItem
from ..reporting import NullReporter, Reporter
from ..wheelhouse.store import Wheelhouse
from .channel import LocalChannel
from .fetch import FetchedWheel, fetch_wheel, prebuilt_key
from .package import CondaPackage, package_for, wheel_to_conda
from .records import CondaRecord, TorchRecord, read_prefix_records, torch_record

__all__ = [
    "ChannelBuild",
    "build_into_channel",
    "channel_plan",
    "environment_torch",
    "in_conda_words",
    "package_plan",
    "prefix_python",
]


@frozen
class ChannelBuild:
    package: CondaPackage
    path: Path  # the .conda file in the channel
    wheel: Path
    cache_hit: bool  # the wheel came from the wheelhouse (no compile) or the download cache
    downloaded_from: str | None = None  # a prebuilt wheel's URL (None: built here)


def prefix_python(prefix: Path) -> Path:
    """The interpreter of a conda environment (or of the venv conda runs from)."""
    for candidate in (prefix / "bin" / "python", prefix / "python.exe"):
        if candidate.exists():
            return candidate
    raise UsageError(
        f"the environment {prefix} has no python",
        hint=f"conda install -p {prefix} python, then try again",
    )


def environment_torch(
    prefix: Path, names: Sequence[str]
) -> tuple[TorchRecord, tuple[CondaRecord, ...]]:
    """The torch ``prefix`` has, which ``names`` are built against (refused: none, or CPU-only),
    and the prefix's records."""
    records = read_prefix_records(prefix)
    torch = torch_record(prefix, records)
    if torch is None:
        raise UsageError(
            f"{', '.join(names)} must be built against the environment's torch, and "
            f"{prefix} has none",
            hint=f"install torch first (conda install -p {prefix} pytorch, or pip install torch), "
            f"then conda install {' '.join(names)}",
        )
    if torch.is_cpu_only:
        raise UsageError(
            f"the environment's torch is {torch.describe()}: a CUDA extension cannot be "
            "built against it",
            hint="install a CUDA build of torch (conda install pytorch=*=cuda*), then try again",
        )
    return torch, records


def build_into_channel(
    names: Sequence[str],
    prefix: Path,
    *,
    channel: LocalChannel,
    index: Index,
    options: InstallOptions,
    arch_list: str | None = None,
    reporter: Reporter | None = None,
    environ: Mapping[str, str] | None = None,
    client: HttpClient | None = None,
) -> list[ChannelBuild]:
    """Build ``names`` (packages cuda-resolve curates) against the environment's torch, or fetch
    the prebuilt wheels the plan takes for them (through ``client``, default: one from
    cuda-resolve's configuration), and put them into ``channel``; returns the packages, which
    conda installs by name."""
    report = reporter or NullReporter()
    base = dict(os.environ if environ is None else environ)
    torch, _ = environment_torch(prefix, names)
    python = prefix_python(prefix)
    running = Path(sys.executable).absolute() == python.absolute()
    from ..detect import detect_environment

    env = detect_environment(python=None if running else str(python), environ=base)
    report.step(f"building {', '.join(names)} against {torch.describe()} in {prefix}")
    plan = channel_plan(
        names, env, torch, index, options, arch_list=arch_list, reporter=report, environ=base
    )
    try:
        return package_plan(
            plan,
            env,
            prefix,
            channel=channel,
            index=index,
            options=options,
            reporter=report,
            environ=base,
            client=client,
        )
    except CudaResolveError as error:  # a build's hint, in conda's terms
        raise in_conda_words(error, names) from None


def channel_plan(
    names: Sequence[str],
    env: Environment,
    torch: TorchRecord,
    index: Index,
    options: InstallOptions,
    *,
    arch_list: str | None = None,
    reporter: Reporter | None = None,
    environ: Mapping[str, str] | None = None,
) -> Plan:
    """The complete plan for ``names`` against the environment's torch (nothing built yet):
    refused where it would change that torch (conda owns it, or its pin does)."""
    from ..install.prepare import TORCH_FAMILY
    from ..install.run import InstallRequest, build_only
    from ..resolve import Options

    entries = None
    if arch_list:
        from ..index.model import parse_arch_list

        try:
            entries = parse_arch_list(arch_list)
        except ValueError as exc:
            raise UsageError(
                f"arch list {arch_list!r}: {exc}",
                hint="write compute capabilities such as '8.0;9.0'",
            ) from None
    request = InstallRequest(
        requirements=tuple(names), resolve=Options(arch_list=entries), dry_run=True
    )
    try:
        plan, _ = build_only(
            request,
            env,
            index,
            options,
            reporter=reporter,
            environ=environ,
            check_source_names=False,  # the settings' sources name packages of any request
        )
    except CudaResolveError as error:
        raise in_conda_words(error, names) from None
    changes = [
        item for item in plan.items if item.name in TORCH_FAMILY and item.kind != "installed"
    ]
    if changes:
        raise UsageError(
            f"{', '.join(names)} cannot be built for the environment's torch "
            f"({torch.describe()}): the plan would install "
            f"{changes[0].requirement or changes[0].name}",
            hint="conda cuda plan "
            + " ".join(names)
            + " shows why; install the torch it names into the environment first",
        )
    return plan


#: What cuda-resolve's reasons say to the command line, and what a conda command cannot take.
_ARCH_LIST_WORDS = "; pass --arch-list (e.g. 8.6) to build for other machines"


def in_conda_words(error: CudaResolveError, names: Sequence[str]) -> CudaResolveError:
    """``error`` as a conda command's user can act on it: conda's ``install`` takes none of
    cuda-resolve's options, so a way out that is an option (``--arch-list``,
    ``--allow-torch-change``) is said in conda's terms: the plugin's setting or conda's
    ``CONDA_OVERRIDE_CUDA_ARCH`` for the GPUs to build for, the environment's torch for a torch
    change, the plugin's sources for ``--source``. Any other error is returned as it is."""
    hint = error.hint or ""
    if "--arch-list" in hint or "--arch-list" in error.message:
        hint = (
            "no GPU here to build for: set the compute capabilities of the machines you build "
            "for, `conda config --set plugins.cuda_resolve_arch_list '8.6;9.0'`, or for one "
            f"command, `CONDA_OVERRIDE_CUDA_ARCH=8.6 conda install {' '.join(names)}`"
        )
    elif "--source DIR" in hint:
        name = names[0] if len(names) == 1 else "PACKAGE"
        hint = (
            "give the plugin a copy of the source (a folder or archive of the recipe's "
            f"repository): `conda config --set plugins.cuda_resolve_sources.{name} DIR`"
        )
    elif "--allow-torch-change" in hint:
        hint = (
            f"`conda cuda plan {' '.join(names)} --allow-torch-change` names the torch that fits; "
            "install that torch into the environment, then retry"
        )
    else:
        return error
    message = error.message.replace(
        _ARCH_LIST_WORDS, " (conda: plugins.cuda_resolve_arch_list or CONDA_OVERRIDE_CUDA_ARCH)"
    )
    converted = copy.copy(error)
    converted.message, converted.hint = message, hint
    converted.args = (message,)
    return converted


def package_plan(
    plan: Plan,
    env: Environment,
    prefix: Path,
    *,
    channel: LocalChannel,
    index: Index,
    options: InstallOptions,
    reporter: Reporter | None = None,
    environ: Mapping[str, str] | None = None,
    client: HttpClient | None = None,
    wheelhouse: Wheelhouse | None = None,
) -> list[ChannelBuild]:
    """Carry out the complete ``plan``'s builds (the wheelhouse's hits included) and fetch its
    prebuilt wheels, and put each into ``channel`` as a package pinned to the torch record
    ``prefix`` has; nothing is installed."""
    from ..install.prepare import TORCH_FAMILY
    from ..install.run import InstallRequest, build_only

    report = reporter or NullReporter()
    names = [item.name for item in plan.items if item.name not in TORCH_FAMILY]
    torch, records = environment_torch(prefix, names)
    _, results = build_only(
        InstallRequest(plan=plan),
        env,
        index,
        options,
        reporter=report,
        environ=environ,
        wheelhouse=wheelhouse,
        check_source_names=False,
    )
    prebuilt = [
        item for item in plan.items if item.kind == "wheel" and item.name not in TORCH_FAMILY
    ]
    fetched = _fetch(prebuilt, env, client, report) if prebuilt else []
    python_record = next((record for record in records if record.name == "python"), None)
    built = []
    with tempfile.TemporaryDirectory(prefix="cuda-resolve-conda-") as scratch:
        for wheel in fetched:
            key, known = prebuilt_key(wheel, torch, index)
            package = package_for(
                key, torch=torch, python=python_record, python_version=env.python.short_version
            )
            made = wheel_to_conda(
                wheel.path,
                package,
                Path(scratch),
                extra_info={
                    "downloaded_from": wheel.url,
                    "toolkit": "",
                    "arch_list_source": (
                        "the index's arch list of the torch build the wheel was made for (the "
                        "wheel states none)"
                        if known
                        else "unknown: the wheel states none and the index knows none for "
                        "its torch build"
                    ),
                },
            )
            path = channel.add(made, package.subdir)
            report.step(
                f"{package.name} {package.version} ({package.build}, the prebuilt wheel from "
                f"{wheel.url}) is in the local channel {channel.url}"
            )
            built.append(
                ChannelBuild(
                    package=package,
                    path=path,
                    wheel=wheel.path,
                    cache_hit=wheel.cache_hit,
                    downloaded_from=wheel.url,
                )
            )
        for result in results:
            package = package_for(
                result.wheel.key,
                torch=torch,
                python=python_record,
                python_version=env.python.short_version,
            )
            made = wheel_to_conda(
                result.wheel.path,
                package,
                Path(scratch),
                extra_info={
                    "toolkit": result.spec.toolkit.root or "",
                    "built_for": result.wheel.key.arch_list,
                },
            )
            path = channel.add(made, package.subdir)
            report.step(
                f"{package.name} {package.version} ({package.build}) is in the local channel "
                f"{channel.url}"
            )
            built.append(
                ChannelBuild(
                    package=package, path=path, wheel=result.wheel.path, cache_hit=result.cache_hit
                )
            )
    return built


def _fetch(
    items: Sequence[PlanItem], env: Environment, client: HttpClient | None, report: Reporter
) -> list[FetchedWheel]:
    from ..paths import cache_root

    folder = cache_root() / "conda-downloads"
    if client is not None:
        return [_fetch_one(item, env, client, folder, report) for item in items]
    from ..net.factory import client_from_config

    with client_from_config(use_cache=False) as own:
        return [_fetch_one(item, env, own, folder, report) for item in items]


def _fetch_one(
    item: PlanItem, env: Environment, client: HttpClient, folder: Path, report: Reporter
) -> FetchedWheel:
    report.step(
        f"{item.name} {item.version}: the plan takes a prebuilt "
        f"wheel{f' ({item.url})' if item.url else ''}: fetching it"
    )
    wheel = fetch_wheel(item, env, client=client, folder=folder)
    report.step(
        f"{item.name} {item.version}: {wheel.path.name} "
        f"{'was already downloaded' if wheel.cache_hit else 'downloaded'}, sha256 {wheel.sha256} "
        "as its page lists"
    )
    return wheel
