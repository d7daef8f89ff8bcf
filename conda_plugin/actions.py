"""conda's objects turned into cuda-resolve's plain data and back: what each hook of
:mod:`conda_plugin.plugin` hands :class:`cuda_resolve.conda.session.CondaSession` (which
decides, and keeps the state between hooks), and the session's three seams over conda's public
API (its solves' records, its solver and transaction, its prefix data). Imported only when a
hook runs."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

from conda.base.context import context
from conda.exceptions import CondaError

from cuda_resolve.conda.records import CondaRecord
from cuda_resolve.conda.session import (
    Command,
    CondaSession,
    PluginSettings,
    Solve,
    Spec,
)
from cuda_resolve.errors import CudaResolveError

_T = TypeVar("_T")


class CudaResolvePluginError(CondaError):  # type: ignore[misc]  # conda is untyped
    """A cuda-resolve error in conda's form (message, then what to do)."""

    def __init__(self, message: str, hint: str | None = None) -> None:
        super().__init__(message + (f"\n\nhint: {hint}" if hint else ""))


def _converted(action: Callable[[], _T]) -> _T:
    """Run ``action``; a cuda-resolve error becomes a conda error (conda renders it)."""
    try:
        return action()
    except CudaResolveError as error:
        raise CudaResolvePluginError(error.message, error.hint) from None


def plugin_settings() -> PluginSettings:
    """The plugin's ``.condarc`` settings and conda's TLS and proxy settings, as plain data."""
    plugins = context.plugins
    return PluginSettings(
        active=bool(getattr(plugins, "cuda_resolve_active", False)),
        channel=str(plugins.cuda_resolve_channel or ""),
        arch_list=str(plugins.cuda_resolve_arch_list or ""),
        sources=tuple(
            (str(name), str(folder))
            for name, folder in (plugins.cuda_resolve_sources or {}).items()
        ),
        keep_stale=tuple(str(name) for name in (plugins.cuda_resolve_keep_stale or ())),
        ssl_verify=context.ssl_verify,
        proxy_servers=tuple((context.proxy_servers or {}).items()),
    )


def _record(record: Any) -> CondaRecord:
    """A conda package record as cuda-resolve's."""
    channel = getattr(record, "channel", None)
    return CondaRecord(
        name=record.name,
        version=str(record.version),
        build=record.build,
        build_number=int(record.build_number or 0),
        depends=tuple(record.depends or ()),
        constrains=tuple(record.constrains or ()),
        subdir=record.subdir or "",
        fn=record.fn or "",
        channel=str(getattr(channel, "base_url", None) or ""),
        url=str(getattr(record, "url", None) or ""),
    )


def _spec(text: str) -> Spec:
    """A spec of the command as cuda-resolve's (conda parses it)."""
    from conda.models.match_spec import MatchSpec

    spec = MatchSpec(text)
    version = spec.version
    return Spec(text=text, name=spec.name, version="" if version is None else str(version))


# -- the session's seams over conda -------------------------------------------------------------


class _Printer:
    """The session's reporter: a line per step, as conda prints its own."""

    def step(self, text: str) -> None:
        print(f"cuda-resolve: {text}", flush=True)

    def note(self, text: str) -> None:
        print(f"cuda-resolve: note: {text}", flush=True)

    def progress(self, label: str, done: int | None, total: int | None, elapsed: float) -> None:
        pass


class _CondaSolver:
    """What conda's solves read: its channels' repodata, and pip's packages as records."""

    def channel_records(self, spec: Spec) -> Sequence[CondaRecord]:
        from conda.core.subdir_data import SubdirData
        from conda.models.match_spec import MatchSpec

        try:
            found = SubdirData.query_all(MatchSpec(spec.text), context.channels, context.subdirs)
            return [_record(record) for record in found]
        except Exception:  # an unreachable channel: no channel build is known to fit
            return []

    def see_pip_records(self) -> None:
        """conda loads pip's packages as records only with prefix-data interoperability on:
        turned on for this command only."""
        if not context.prefix_data_interoperability:
            os.environ["CONDA_PREFIX_DATA_INTEROPERABILITY"] = "true"
            context._set_env_vars("conda")


class _CondaPrefix:
    """An environment through conda's prefix data (its records without pip's, its variables)."""

    def records(self, prefix: Path) -> Sequence[CondaRecord]:
        from conda.core.prefix_data import PrefixData

        data = PrefixData(str(prefix), interoperability=False)
        data.reload()
        return [_record(record) for record in data.iter_records()]

    def env_vars(self, prefix: Path) -> dict[str, str]:
        from conda.core.prefix_data import PrefixData

        return dict(PrefixData(str(prefix)).get_environment_env_vars())

    def set_env_vars(self, prefix: Path, variables: Mapping[str, str]) -> None:
        from conda.core.prefix_data import PrefixData

        PrefixData(str(prefix)).set_environment_env_vars(dict(variables))

    def unset_env_vars(self, prefix: Path, names: Sequence[str]) -> None:
        from conda.core.prefix_data import PrefixData

        PrefixData(str(prefix)).unset_environment_env_vars(list(names))


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


_SESSION: list[CondaSession] = []


def session() -> CondaSession:
    """The session of this process's conda command (made by the first hook that runs)."""
    if not _SESSION:
        _SESSION.append(
            CondaSession(
                solver=_CondaSolver(),
                install=_install_through_conda,
                prefixes=_CondaPrefix(),
                reporter=_Printer(),
            )
        )
    return _SESSION[0]


# -- the hooks' actions -------------------------------------------------------------------------


def subcommand(argv: tuple[str, ...]) -> int:
    """``conda cuda ...``: cuda-resolve's commands with the environment conda names."""
    from cuda_resolve.conda.subcommand import USAGE

    if not argv or argv[0] in ("-h", "--help"):
        print(USAGE)
        return 0
    verb = argv[0]
    if verb in ("activate", "deactivate"):
        from conda.cli.main import main_subshell

        on = verb == "activate"
        main_subshell("config", "--set", "plugins.cuda_resolve_active", "true" if on else "false")
        print(
            f"cuda-resolve is {'active' if on else 'inactive'} for conda install/create/update "
            f"(plugins.cuda_resolve_active in {Path('~/.condarc').expanduser()})"
        )
        return 0
    if verb == "channel":
        return _channel(argv[1:])
    from conda.base.context import locate_prefix_by_name

    from cuda_resolve.cli import main
    from cuda_resolve.conda.subcommand import cuda_argv

    def locate(name: str) -> Path:
        return Path(locate_prefix_by_name(name))

    return main(
        _converted(lambda: cuda_argv(argv, locate=locate, default=Path(context.target_prefix)))
    )


def _channel(words: Sequence[str]) -> int:
    from conda.core.envs_manager import list_all_known_prefixes

    from cuda_resolve.conda.channel import LocalChannel
    from cuda_resolve.conda.subcommand import channel_lines

    channel = LocalChannel.default(plugin_settings().channel)
    known = [Path(prefix) for prefix in list_all_known_prefixes()]
    for line in channel_lines(words, channel, lambda: known):
        print(line)
    return 0


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


def _channel_options(args: Any) -> tuple[str, ...]:
    """The command's channel options as the user gave them (before the local channel is added),
    for the commands the hints name."""
    given = args.get("channel")
    channels = [given] if isinstance(given, str) else list(given or ())
    words = ["--override-channels"] if args.get("override_channels") else []
    for channel in channels:
        words += ["-c", str(channel)]
    return tuple(words)


def before_install(command: str) -> None:
    """The pre-command: the command's specs and channels as the session decides them."""
    settings = plugin_settings()
    if not settings.active:
        return
    args = context._argparse_args
    texts = list(args.get("packages") or args.get("package_names") or [])  # remove: package_names
    request = Command(
        name=command,
        prefix=Path(context.target_prefix),
        specs=tuple(_converted(lambda: [_spec(text) for text in texts])),
        dry_run=bool(args.get("dry_run")),
        remove_all=bool(args.get("all")),
        channel_options=_channel_options(args),
    )
    edit = _converted(lambda: session().before_command(request, settings))
    if edit is None:
        return
    if edit.specs is not None and list(edit.specs) != texts:
        args.get("packages")[:] = edit.specs  # in place: conda's install reads this list
    if edit.add_channel:
        _add_channel(args, edit.add_channel)
    if edit.dry_run_done:
        from conda.exceptions import DryRunExit

        raise DryRunExit()


def veto_solve(link_precs: Sequence[Any], unlink_precs: Sequence[Any] = ()) -> None:
    """The post-solve: the session's veto over conda's solve."""
    settings = plugin_settings()
    if not settings.active:
        return
    solve = Solve(
        prefix=Path(context.target_prefix),
        link=tuple(map(_record, link_precs)),
        unlink=tuple(map(_record, unlink_precs)),
        dry_run=bool(context.dry_run),
    )
    _converted(lambda: session().veto(solve, settings))


def after_install(command: str) -> None:
    """The post-command: deferred names finished, conda variables for what was built."""
    settings = plugin_settings()
    _converted(lambda: session().after_command(settings, tuple(context.channels)))


def after_remove(command: str) -> None:
    unset_build_variables(Path(context.target_prefix))


def unset_build_variables(prefix: Path) -> None:
    settings = plugin_settings()
    _converted(lambda: session().after_remove(prefix, settings))


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
    from conda.exceptions import PackagesNotFoundError, UnsatisfiableError
    from conda.plugins.types import CondaErrorHint

    if isinstance(error, UnsatisfiableError):  # rattler's is a subclass
        try:
            held = session().unsatisfiable_hint(plugin_settings())
        except Exception:  # a hint must never replace the error it explains
            return
        if held:
            yield CondaErrorHint(text=held, hint_code="cuda_resolve_torch_change")
        return
    if not isinstance(error, PackagesNotFoundError) or plugin_settings().active:
        return
    names = [str(getattr(p, "name", p)).split()[0] for p in error.packages]
    try:
        from cuda_resolve.conda.session import inactive_hint
        from cuda_resolve.index import default_index

        text = inactive_hint(names, default_index())
    except Exception:  # a hint must never replace the error it explains
        return
    if text:
        yield CondaErrorHint(text=text, hint_code="cuda_resolve_inactive")


def health_check(prefix: str, verbose: bool) -> None:
    from cuda_resolve.cli import main
    from cuda_resolve.conda.convert import prefix_python

    try:
        python = prefix_python(Path(prefix))
    except Exception as error:  # a check reports; it never crashes conda doctor
        print(f"cuda-resolve: {error}")
        return
    main(["doctor", "--python", str(python)])
