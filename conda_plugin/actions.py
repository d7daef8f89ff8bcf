"""What the hooks do, with conda's objects turned into cuda-resolve's conda-agnostic ones
(:mod:`cuda_resolve.conda`) and back. Imported only when a hook runs."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from conda.base.context import context
from conda.exceptions import CondaError

#: What this process built into the local channel for the command being run (prefix, packages).
_BUILT: list[tuple[Path, Any]] = []


@dataclass(frozen=True)
class _Deferred:
    """Names taken out of a command's specs, to be built against the torch the command brings and
    installed after it (``conda create -n x pytorch kaolin``)."""

    command: str
    prefix: Path
    specs: tuple[str, ...]  # as the user wrote them (the command that finishes the job names them)
    requirements: tuple[str, ...]  # the same as PEP 508 requirements for cuda-resolve's planner


#: The command's deferred names (at most one entry: one conda command per process).
_DEFERRED: list[_Deferred] = []
_ACTIVATE = "conda config --set plugins.cuda_resolve_active true"
_PASS_THROUGH = ("doctor", "detect", "plan", "install", "build", "lock", "sync")


class CudaResolvePluginError(CondaError):
    """A cuda-resolve error in conda's form (message, then what to do)."""

    def __init__(self, message: str, hint: str | None = None) -> None:
        super().__init__(message + (f"\n\nhint: {hint}" if hint else ""))


def _settings() -> Any:
    return context.plugins


def _active() -> bool:
    return bool(getattr(_settings(), "cuda_resolve_active", False))


def _converted(action: Any) -> Any:
    """Run ``action``; a cuda-resolve error becomes a conda error (conda renders it)."""
    from cuda_resolve.errors import CudaResolveError

    try:
        return action()
    except CudaResolveError as error:
        raise CudaResolvePluginError(error.message, error.hint) from None


# -- conda cuda ... ---------------------------------------------------------------------------


def _split_target(argv: Sequence[str]) -> tuple[Path, list[str]]:
    """``-n NAME`` / ``-p PATH`` out of ``argv``; default: the active environment."""
    from conda.base.context import locate_prefix_by_name

    rest: list[str] = []
    prefix: Path | None = None
    words = list(argv)
    while words:
        word = words.pop(0)
        for short, long in (("-n", "--name"), ("-p", "--prefix")):
            if word in (short, long) or word.startswith(long + "="):
                value = word.split("=", 1)[1] if "=" in word else (words.pop(0) if words else "")
                if not value:
                    raise CudaResolvePluginError(
                        f"{word} needs a value",
                        hint=f"conda cuda doctor {short} <{'name' if short == '-n' else 'path'}>",
                    )
                prefix = (
                    Path(locate_prefix_by_name(value))
                    if short == "-n"
                    else Path(value).expanduser().absolute()
                )
                break
        else:
            rest.append(word)
    return (prefix or Path(context.target_prefix)), rest


_USAGE = """usage: conda cuda COMMAND [-n NAME | -p PATH] [options]

cuda-resolve for a conda environment (default: the active one):
  doctor, detect, plan, install, build,  cuda-resolve's commands with this environment as the target
  lock, sync                             (`conda cuda plan --help` for each one's options; lock
                                         adds the environment as profile `this`)
  channel [--prune]                      list the local channel (--prune: drop what no environment uses)
  activate / deactivate                  plain `conda install` builds what no channel serves (a .condarc setting)
"""


def subcommand(argv: tuple[str, ...]) -> int:
    if not argv or argv[0] in ("-h", "--help"):
        print(_USAGE)
        return 0
    verb, rest = argv[0], argv[1:]
    if verb in ("activate", "deactivate"):
        from conda.cli.main import main_subshell

        main_subshell(
            "config",
            "--set",
            "plugins.cuda_resolve_active",
            "true" if verb == "activate" else "false",
        )
        print(
            f"cuda-resolve is {'active' if verb == 'activate' else 'inactive'} for conda install/create/update "
            f"(plugins.cuda_resolve_active in {Path('~/.condarc').expanduser()})"
        )
        return 0
    if verb == "channel":
        return _channel(rest)
    if verb not in _PASS_THROUGH:
        raise CudaResolvePluginError(
            f"conda cuda {verb}: no such command", hint="conda cuda --help lists them"
        )
    prefix, words = _split_target(rest)
    from cuda_resolve.cli import main
    from cuda_resolve.conda.convert import prefix_python

    python = _converted(lambda: prefix_python(prefix))
    if "--python" in words or ("--profile" in words and verb not in ("build", "lock")):
        raise CudaResolvePluginError(
            f"conda cuda {verb}: the target is the conda environment",
            hint="name it with -n NAME or -p PATH",
        )
    if verb == "lock":  # the environment is the machine class `this`, resolved by its interpreter
        profiles = (
            [] if any(word.startswith("--profile") for word in words) else ["--profile", "this"]
        )
        return main([verb, *words, *profiles, "--python-for", f"this={python}"])
    return main([verb, *words, "--python", str(python)])


def _channel(words: Sequence[str]) -> int:
    from cuda_resolve.conda.channel import LocalChannel

    channel = LocalChannel.default(_settings().cuda_resolve_channel)
    if "--prune" in words:
        removed = channel.prune(_installed_from(channel))
        for path in removed:
            print(f"removed {path.name}")
        print(f"{len(removed)} package(s) removed; the wheelhouse keeps their wheels")
    print(f"local channel: {channel.url}")
    for path in channel.packages():
        print(f"  {path.parent.name}/{path.name}")
    return 0


def _installed_from(channel: Any) -> set[str]:
    """The package files of ``channel`` that any known conda environment has installed."""
    import json

    from conda.core.envs_manager import list_all_known_prefixes

    used: set[str] = set()
    for prefix in list_all_known_prefixes():
        for meta in Path(prefix, "conda-meta").glob("*.json"):
            try:
                data = json.loads(meta.read_text())
            except (OSError, ValueError):
                continue
            if str(data.get("url", "")).startswith(channel.url) or str(
                data.get("channel", "")
            ).startswith(channel.url):
                used.add(str(data.get("fn", "")))
    return used


# -- plain conda install ----------------------------------------------------------------------


def _curated(names: Sequence[str]) -> tuple[Any, list[str]]:
    """cuda-resolve's index, and the names in it that are extensions it builds or whose prebuilt
    wheels it knows (not torch)."""
    from cuda_resolve.index import default_index
    from cuda_resolve.install.prepare import TORCH_FAMILY

    index = default_index()
    picked = []
    for name in names:
        package = index.package(name)
        if (
            package is not None
            and name not in (*TORCH_FAMILY, "pytorch")
            and (package.recipes or package.wheels)
        ):
            picked.append(name)
    return index, picked


def _refuse_insecure_tls() -> None:
    if context.ssl_verify is False:
        raise CudaResolvePluginError(
            "ssl_verify is false in your conda configuration: cuda-resolve never downloads without verifying TLS",
            hint="set ssl_verify: truststore (the system's trust store) or the path of your CA bundle: conda config --set ssl_verify truststore",
        )
    if (
        isinstance(context.ssl_verify, str)
        and context.ssl_verify not in ("truststore",)
        and Path(context.ssl_verify).exists()
    ):
        # A CA path from .condarc reaches the builds' downloads (requests and pip read these).
        os.environ.setdefault("REQUESTS_CA_BUNDLE", context.ssl_verify)
        os.environ.setdefault("PIP_CERT", context.ssl_verify)
    for scheme, proxy in (context.proxy_servers or {}).items():
        if scheme in ("http", "https"):
            os.environ.setdefault(f"{scheme.upper()}_PROXY", proxy)


def _channel_records(spec: Any) -> list[Any]:
    """The records the configured channels have for ``spec`` (empty when they cannot be read)."""
    from conda.core.subdir_data import SubdirData

    try:
        return list(SubdirData.query_all(spec, context.channels, context.subdirs))
    except Exception:  # an unreachable channel: no channel build is known to fit
        return []


def _as_record(record: Any) -> Any:
    from cuda_resolve.conda.records import CondaRecord

    return CondaRecord(
        name=record.name,
        version=str(record.version),
        build=record.build,
        build_number=int(record.build_number or 0),
        depends=tuple(record.depends or ()),
        constrains=tuple(record.constrains or ()),
        subdir=record.subdir or "",
        fn=record.fn or "",
    )


def _enable_pip_records() -> None:
    """pip's torch must be a record in the solve (its pin): conda loads such records only with
    prefix-data interoperability on; turned on for this command only."""
    if not context.prefix_data_interoperability:
        os.environ["CONDA_PREFIX_DATA_INTEROPERABILITY"] = "true"
        context._set_env_vars("conda")


def before_install(command: str) -> None:
    if not _active():
        return
    args = context._argparse_args
    packages = list(
        args.get("packages") or args.get("package_names") or []
    )  # remove: package_names
    _keep_solvable(args, command, packages)
    if not packages or command == "remove":
        return
    from conda.models.match_spec import MatchSpec

    specs = [MatchSpec(text) for text in args.get("packages")]
    index, names = _curated([spec.name for spec in specs])
    if not names:
        return
    _converted(lambda: _serve(command, args, args.get("packages"), specs, index, names))


def _keep_solvable(args: Any, command: str, packages: Sequence[str]) -> None:
    """Every later solve of an environment that has packages from the local channel sees that
    channel (their records must have candidates) and pip's torch (their pin names it), except
    a remove of those packages themselves: there a solver counts pip's torch as a dependency
    left over and plans to remove it too (and conda's own pypi records carry pip's files)."""
    from cuda_resolve.conda.channel import LocalChannel
    from cuda_resolve.conda.records import pip_distribution

    prefix = Path(context.target_prefix)
    meta = prefix / "conda-meta"
    if not meta.is_dir():
        return
    channel = LocalChannel.default(_settings().cuda_resolve_channel)
    ours = set()
    for path in meta.glob("*.json"):
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if isinstance(data, dict) and str(data.get("url") or data.get("channel") or "").startswith(
            channel.url
        ):
            ours.add(str(data.get("name")))
    if not ours:
        return
    _add_channel(args, channel.url)
    if command == "remove":
        from conda.models.match_spec import MatchSpec

        if {MatchSpec(text).name for text in packages} & ours or args.get("all"):
            return
    if pip_distribution(prefix, "torch") is not None:
        _enable_pip_records()


def _add_channel(args: Any, url: str) -> None:
    """The local channel after the command's own channels (a list, a tuple or one name: kept)."""
    given = args.get("channel")
    channels = [given] if isinstance(given, str) else list(given or ())
    if url in channels:
        return
    if isinstance(given, list):
        given.append(url)  # in place: conda's install reads the parsed namespace's own list
    else:
        args["channel"] = [*channels, url]
    context._set_argparse_args(args)


def _serve(
    command: str, args: Any, packages: list[str], specs: Sequence[Any], index: Any, names: list[str]
) -> None:
    from cuda_resolve.conda.channel import LocalChannel
    from cuda_resolve.conda.records import torch_record
    from cuda_resolve.conda.serve import best_fitting, build_fits
    from cuda_resolve.detect import detect_environment

    prefix = Path(context.target_prefix)
    torch = torch_record(prefix) if prefix.is_dir() else None
    # The torch the build pairs with comes with this command (a new environment, none yet, or a
    # torch spec in the command): channel builds are judged without it, ours wait for it.
    torch_changes = (
        command == "create"
        or torch is None
        or any(spec.name in ("pytorch", "torch") for spec in map(_spec, packages))
    )
    judged = None if torch_changes else torch
    python = (prefix / "bin" / "python") if (prefix / "bin" / "python").exists() else None
    running = python is not None and Path(sys.executable).absolute() == python.absolute()
    env = detect_environment(python=None if running or python is None else str(python))
    settings = _settings()
    channel = LocalChannel.default(settings.cuda_resolve_channel)
    to_build = []
    for spec in specs:
        if spec.name not in names:
            continue
        fits = [
            build_fits(_as_record(r), env, judged, index)
            for r in _channel_records(spec)
            if not str(r.channel.base_url or "").startswith(channel.url)
        ]
        best = best_fitting(fits)
        if best is not None:
            print(f"cuda-resolve: the channel build {best.describe()}")
            _pin(packages, spec.name, best.record.version, best.record.build)
            continue
        for fit in fits:
            print(f"cuda-resolve: {fit.describe()}")
        to_build.append(spec.name)
    if torch is not None and torch.source == "pip":
        _enable_pip_records()  # the pin of a fitting build, or of ours, names pip's torch
    if not to_build:
        return
    requirements = [_requirement(spec) for spec in specs if spec.name in to_build]
    if torch_changes:
        _defer(command, prefix, packages, to_build, requirements)
        return
    assert torch is not None
    if args.get("dry_run"):
        from conda.exceptions import DryRunExit

        print(
            f"cuda-resolve: would build {', '.join(requirements)} against {torch.describe()} into the local channel "
            f"{channel.url} (conda cuda plan -p {prefix} {' '.join(to_build)} shows the build)"
        )
        raise DryRunExit()
    for item in _build(prefix, requirements, index, channel):
        _pin(packages, item.package.name, item.package.version, item.package.build)
        _BUILT.append((prefix, item))
    _add_channel(args, channel.url)


def _build(prefix: Path, requirements: Sequence[str], index: Any, channel: Any) -> list[Any]:
    """Build (or fetch) ``requirements`` for the environment's torch into the local channel."""
    from cuda_resolve.conda.convert import build_into_channel

    report, options, arch_list = _build_setup()
    return build_into_channel(
        list(requirements),
        prefix,
        channel=channel,
        index=index,
        options=options,
        arch_list=arch_list,
        reporter=report,
    )


def _build_setup() -> tuple[Any, Any, str | None]:
    """The reporter that prints as conda does, the build options and arch list from the settings
    (TLS and proxies checked first: a build downloads)."""
    from cuda_resolve.install.options import InstallOptions
    from cuda_resolve.reporting import NullReporter

    _refuse_insecure_tls()

    class _Printer(NullReporter):
        def step(self, text: str) -> None:
            print(f"cuda-resolve: {text}", flush=True)

        def note(self, text: str) -> None:
            print(f"cuda-resolve: note: {text}", flush=True)

    settings = _settings()
    sources = tuple(
        (name, Path(folder).expanduser())
        for name, folder in (settings.cuda_resolve_sources or {}).items()
    )
    options = InstallOptions(
        source_dirs=sources, explicit_arch_list=bool(settings.cuda_resolve_arch_list)
    )
    return _Printer(), options, settings.cuda_resolve_arch_list or None


def _spec(text: str) -> Any:
    from conda.models.match_spec import MatchSpec

    return MatchSpec(text)


def _defer(
    command: str,
    prefix: Path,
    packages: list[str],
    names: Sequence[str],
    requirements: Sequence[str],
) -> None:
    """Take ``names`` out of the command's specs (in place: conda's install reads this list):
    conda solves and installs the rest, torch included; :func:`after_install` then builds them
    against that torch and installs them through conda. :func:`veto_solve` refuses, before
    anything is installed, a solve that brings no CUDA torch to build against."""
    taken = [text for text in packages if _spec(text).name in names]
    for text in taken:
        packages.remove(text)
    if not packages:
        raise CudaResolvePluginError(
            f"{', '.join(names)} must be built against the torch this command installs, and it installs nothing else: nothing was changed",
            hint=f"name the torch too: conda {command} -p {prefix} pytorch {' '.join(taken)}",
        )
    _DEFERRED.append(
        _Deferred(
            command=command, prefix=prefix, specs=tuple(taken), requirements=tuple(requirements)
        )
    )
    print(
        f"cuda-resolve: no channel build of {', '.join(names)} fits this machine; conda installs the rest first, "
        "then cuda-resolve builds them against the torch it brought and installs them through conda",
        flush=True,
    )


def _requirement(spec: Any) -> str:
    """A conda spec's name and version as a PEP 508 requirement for cuda-resolve's resolver
    (``pointnet2_ops=3.0`` -> ``pointnet2_ops==3.0.*``); a build string has no PEP 440 meaning."""
    from packaging.specifiers import InvalidSpecifier, SpecifierSet

    version = str(spec.version) if spec.version is not None else ""
    if not version or version == "*":
        return str(spec.name)
    text = ",".join(part if part[:1] in "<>=!~" else f"=={part}" for part in version.split(","))
    try:
        SpecifierSet(text)
    except InvalidSpecifier:
        raise CudaResolvePluginError(
            f"{spec}: cuda-resolve cannot read the version {version!r} as a PEP 440 specifier",
            hint=f"write it as {spec.name}=X.Y or '{spec.name}>=X.Y'",
        ) from None
    return f"{spec.name}{text}"


def _pin(packages: list[str], name: str, version: str, build: str) -> None:
    """Replace the command's spec for ``name`` (in place: conda's install reads this list) by
    the exact record that was decided, so no other channel's build of it is taken instead."""
    from conda.models.match_spec import MatchSpec

    for position, text in enumerate(packages):
        if MatchSpec(text).name == name:
            packages[position] = f"{name}[version='=={version}',build={build}]"


def after_install(command: str) -> None:
    """Conda environment variables for what was built into the environment: CUDA_HOME (the
    toolkit it was built with) and TORCH_CUDA_ARCH_LIST (what it was built for), so a later
    build in the environment and a Slurm job see the same.

    First, names a pre-command deferred (:func:`_defer`) are built against the torch the command
    just installed and installed through conda's own solver and transaction."""
    if _DEFERRED:
        _finish(_DEFERRED.pop())
    if not _BUILT:
        return
    from conda.core.prefix_data import PrefixData

    prefix, item = _BUILT[-1]
    _BUILT.clear()
    from cuda_resolve.conda.package import read_package_info

    _, ours = read_package_info(item.path)
    if ours.get("downloaded_from"):
        return  # a prebuilt wheel: nothing was compiled here, no toolkit or arch list to pass on
    variables = {"TORCH_CUDA_ARCH_LIST": str(ours.get("built_for") or ours.get("arch_list"))}
    if ours.get("toolkit"):
        variables["CUDA_HOME"] = str(ours["toolkit"])
    PrefixData(str(prefix)).set_environment_env_vars(variables)
    _env_vars_marker(prefix).write_text(json.dumps(variables, indent=1, sort_keys=True))
    print(
        "cuda-resolve: set "
        + ", ".join(f"{k}={v}" for k, v in variables.items())
        + f" for {prefix} (conda env config vars list)"
    )


def _finish(deferred: _Deferred) -> None:
    """Build the deferred names against the torch the environment now has and install them
    through conda (its solver, whichever the user runs, and its transaction, which undoes
    itself on failure). If that fails, the environment holds what the command installed and
    nothing of ours: the error says so and names the one command that finishes the job."""
    from cuda_resolve.conda.channel import LocalChannel
    from cuda_resolve.conda.records import read_prefix_records, torch_record
    from cuda_resolve.errors import CudaResolveError
    from cuda_resolve.index import default_index

    prefix = deferred.prefix
    channel = LocalChannel.default(_settings().cuda_resolve_channel)
    finish = f"conda install -p {prefix} " + " ".join(_quoted(text) for text in deferred.specs)
    try:
        _install_with_backend(prefix, deferred.requirements, default_index(), channel)
    except (CudaResolveError, CondaError, OSError) as error:
        message = error.message if isinstance(error, CudaResolveError) else str(error).strip()
        hint = error.hint if isinstance(error, CudaResolveError) else None
        records = read_prefix_records(prefix) if (prefix / "conda-meta").is_dir() else ()
        torch = torch_record(prefix, records) if records else None
        raise CudaResolvePluginError(
            f"conda {deferred.command} finished: {prefix} exists with {len(records)} conda package(s)"
            f"{f', {torch.describe()} among them' if torch else ''}; but {', '.join(deferred.specs)} "
            f"{'is' if len(deferred.specs) == 1 else 'are'} not installed in it: {message}",
            hint=(f"{hint}; then finish with: {finish}" if hint else f"finish with: {finish}"),
        ) from None


def _install_with_backend(
    prefix: Path, requirements: Sequence[str], index: Any, channel: Any
) -> None:
    """Plan ``requirements`` against the torch ``prefix`` has and carry the plan out with the
    conda-channel backend (builds or downloads, conversion, conda's own transaction)."""
    from cuda_resolve.conda.backend import CondaChannelBackend
    from cuda_resolve.conda.convert import channel_plan, environment_torch, prefix_python
    from cuda_resolve.detect import detect_environment

    torch, _ = environment_torch(prefix, requirements)
    if torch.source == "pip":
        _enable_pip_records()  # the packages' pin names pip's torch
    python = prefix_python(prefix)
    running = Path(sys.executable).absolute() == python.absolute()
    env = detect_environment(python=None if running else str(python))
    report, options, arch_list = _build_setup()
    report.step(f"building {', '.join(requirements)} against {torch.describe()} in {prefix}")
    plan = channel_plan(
        requirements, env, torch, index, options, arch_list=arch_list, reporter=report
    )
    backend = CondaChannelBackend(
        prefix=prefix,
        channel=channel,
        install=_install_through_conda,
        channels=tuple(context.channels),
    )
    result = backend.execute(plan, env, index=index, options=options, reporter=report)
    from cuda_resolve.conda.records import read_prefix_records

    ours = {name for name, _, after in result.changed if after is not None}
    for record in read_prefix_records(prefix):
        if record.name in ours:
            _BUILT.append((prefix, _InstalledFromChannel(channel.root / record.subdir / record.fn)))


@dataclass(frozen=True)
class _InstalledFromChannel:
    """What :func:`after_install` needs of a package the backend installed: its channel file."""

    path: Path


def _quoted(text: str) -> str:
    import shlex

    return shlex.quote(text)


def _install_through_conda(prefix: Path, channels: Sequence[str], specs: Sequence[str]) -> None:
    """``conda install -p PREFIX SPECS`` through conda's public API: the user's solver backend
    (``conda.api.Solver``), conda's transaction (with its own rollback), the specs recorded in
    the environment's history, the installed packages frozen."""
    from conda.api import Solver
    from conda.base.constants import UpdateModifier
    from conda.models.match_spec import MatchSpec

    solver = Solver(
        str(prefix),
        list(dict.fromkeys(channels)),
        context.subdirs,
        specs_to_add=[MatchSpec(text) for text in specs],
    )
    transaction = solver.solve_for_transaction(update_modifier=UpdateModifier.FREEZE_INSTALLED)
    if not context.json:
        transaction.print_transaction_summary()
    transaction.download_and_extract()
    transaction.execute()


def _env_vars_marker(prefix: Path) -> Path:
    """What the plugin set in the environment's conda variables (so that it unsets only that)."""
    return (
        prefix / "conda-meta" / "cuda-resolve-env-vars"
    )  # not *.json: conda reads those as records


def after_remove(command: str) -> None:
    """Unset the variables a build set once no package of the local channel is left, unless the
    user changed them since."""
    unset_build_variables(Path(context.target_prefix))


def unset_build_variables(prefix: Path) -> None:
    marker = _env_vars_marker(prefix)
    if not marker.is_file():
        return
    from conda.core.prefix_data import PrefixData

    from cuda_resolve.conda.channel import LocalChannel

    channel = LocalChannel.default(_settings().cuda_resolve_channel)
    data = PrefixData(str(prefix), interoperability=False)
    data.reload()
    if any(
        str(record.get("url", "") or "").startswith(channel.url) for record in data.iter_records()
    ):
        return
    ours = json.loads(marker.read_text())
    current = data.get_environment_env_vars()
    names = [name for name, value in ours.items() if current.get(name) == value]
    if names:
        data.unset_environment_env_vars(names)
        print(
            f"cuda-resolve: unset {', '.join(names)} for {prefix} (nothing built by cuda-resolve is left)"
        )
    marker.unlink()


def veto_solve(link_precs: Sequence[Any], unlink_precs: Sequence[Any] = ()) -> None:
    if not _active():
        return
    if _DEFERRED:
        _check_deferred(_DEFERRED[-1], link_precs, unlink_precs)
    from cuda_resolve.conda.serve import veto_cpu_torch, veto_torch_swap

    pytorch = [record for record in link_precs if record.name == "pytorch"]
    if not pytorch:
        return
    prefix = Path(context.target_prefix)
    if (prefix / "conda-meta").is_dir():
        from cuda_resolve.conda.records import read_prefix_records, torch_record

        installed = read_prefix_records(prefix)
        swap = veto_torch_swap(
            [_as_record(record) for record in pytorch], installed, torch_record(prefix, installed)
        )
        if swap:
            raise CudaResolvePluginError(
                swap,
                hint="conda remove those packages first (conda install builds them again for the new torch), or keep pip's torch",
            )
    from cuda_resolve.detect import detect_environment

    reason = veto_cpu_torch(detect_environment(), [_as_record(record) for record in pytorch])
    if reason:
        raise CudaResolvePluginError(
            reason,
            hint="ask for a CUDA build: conda install 'pytorch=*=cuda*' (with conda-forge), or set CONDA_OVERRIDE_CUDA if __cuda is missing",
        )


def _check_deferred(
    deferred: _Deferred, link_precs: Sequence[Any], unlink_precs: Sequence[Any]
) -> None:
    """Before conda changes anything: the solve must leave a CUDA torch in the environment for
    the deferred names to be built against (else they could never be installed, and the
    command would stop half-way)."""
    from cuda_resolve.conda.records import TorchRecord, torch_record

    incoming = [record for record in link_precs if record.name == "pytorch"]
    torch: TorchRecord | None
    if incoming:
        torch = TorchRecord.from_channel_record(_as_record(incoming[-1]))
    else:
        current = (
            torch_record(deferred.prefix) if (deferred.prefix / "conda-meta").is_dir() else None
        )
        leaving = {record.name for record in unlink_precs}
        torch = current if current is not None and current.name not in leaving else None
    names = " ".join(_quoted(text) for text in deferred.specs)
    if torch is None:
        raise CudaResolvePluginError(
            f"{', '.join(deferred.specs)} must be built against the environment's torch, and this solve leaves none in {deferred.prefix}: nothing was changed",
            hint=f"add a CUDA build of pytorch to the command: conda {deferred.command} -p {deferred.prefix} 'pytorch=*=cuda*' {names}",
        )
    if torch.is_cpu_only:
        raise CudaResolvePluginError(
            f"{', '.join(deferred.specs)} must be built against a CUDA torch, and this solve gives {deferred.prefix} {torch.describe()}: nothing was changed",
            hint=f"ask for a CUDA build: conda {deferred.command} -p {deferred.prefix} 'pytorch=*=cuda*' {names}",
        )
    if context.dry_run:
        print(
            f"cuda-resolve: after this, {', '.join(deferred.specs)} would be built against {torch.describe()} "
            "and installed through conda",
            flush=True,
        )


def load_pip_torch(prefix: Any, records: dict[str, Any]) -> dict[str, Any]:
    """pip's torch as a record (name ``torch``, build ``pypi_0``), where conda's own pypi loader
    did not make one (it needs python to be a conda package; a venv-hosted conda has none)."""
    if "torch" in records:
        return {}
    from cuda_resolve.conda.records import PIP_BUILD, pip_distribution

    found = pip_distribution(Path(prefix), "torch")
    if found is None:
        return {}
    from conda.models.channel import Channel
    from conda.models.enums import PackageType
    from conda.models.records import PrefixRecord

    record = PrefixRecord(
        name="torch",
        version=found.version,
        build=PIP_BUILD,
        build_number=0,
        # fn in conda's archive form: solvers that convert installed records
        # (conda-rattler-solver) parse it; the record stays in memory only
        # and the platform's subdir, so that a solver's record for it round-trips
        # to this one (conda-rattler-solver rebuilds <channel>/<subdir>)
        channel=Channel("pypi"),
        subdir=context.subdir,
        fn=f"torch-{found.version}-{PIP_BUILD}.conda",
        package_type=PackageType.VIRTUAL_PYTHON_WHEEL,
        files=(),
        paths_data=None,
        url=found.dist_info.as_uri(),
    )
    records["torch"] = record
    return {"torch": record}


def error_hints(error: Any) -> Iterator[Any]:
    from conda.exceptions import PackagesNotFoundError
    from conda.plugins.types import CondaErrorHint

    if not isinstance(error, PackagesNotFoundError) or _active():
        return
    names = [str(getattr(p, "name", p)).split()[0] for p in error.packages]
    try:
        _, curated = _curated(names)
    except Exception:  # a hint must never replace the error it explains
        return
    if curated:
        yield CondaErrorHint(
            text=f"cuda-resolve can build {', '.join(curated)} for this environment's torch and GPUs, but its conda plugin is not active: {_ACTIVATE} (or: conda cuda activate), then run this command again",
            hint_code="cuda_resolve_inactive",
        )


def health_check(prefix: str, verbose: bool) -> None:
    from cuda_resolve.cli import main
    from cuda_resolve.conda.convert import prefix_python

    try:
        python = prefix_python(Path(prefix))
    except Exception as error:  # a check reports; it never crashes conda doctor
        print(f"cuda-resolve: {error}")
        return
    main(["doctor", "--python", str(python)])
