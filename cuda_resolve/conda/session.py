"""What cuda-resolve does around one conda command, with no import of conda.

conda calls the plugin's hooks in this order for ``conda install/create/update``: the
pre-command (:meth:`CondaSession.before_command`), then for each solve the post-solve
(:meth:`CondaSession.veto`), then the post-command (:meth:`CondaSession.after_command`). What
one hook decides for a later one (names deferred until the command's torch exists, the package
whose conda variables to set) is a session's state; conda runs one command per process, so the
plugin keeps one session.

conda reaches this code through three small seams. The plugin implements them over conda's
public API; the tests implement them over py-rattler (tests/test_conda_session.py):

- :class:`Solver`: what the command's solves read (the channels' records for a spec, and pip's
  packages as records);
- :class:`~cuda_resolve.conda.backend.CondaInstall`: one solve and transaction that installs
  exact specs into a prefix (conda's undoes itself when it fails);
- :class:`PrefixRecords`: an environment's records and its conda variables.

Everything else the hooks get is plain data (:class:`Command`, :class:`Solve`,
:class:`PluginSettings`) and what the pre-command changes in conda's command is returned as
data (:class:`CommandEdit`). Errors are :class:`~cuda_resolve.errors.CudaResolveError`; the
plugin turns them into conda's.
"""

from __future__ import annotations

import json
import os
import shlex
import sys
from collections.abc import Callable, Mapping, MutableMapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from .._frozen import frozen
from ..environment import Environment
from ..errors import CudaResolveError, UsageError
from ..index.model import Index
from ..install.options import InstallOptions
from ..reporting import NullReporter, Reporter
from .backend import CondaChannelBackend, CondaInstall
from .channel import LocalChannel
from .convert import (
    ChannelBuild,
    build_into_channel,
    channel_plan,
    environment_torch,
    in_conda_words,
    prefix_python,
)
from .matchspec import parse_spec
from .records import CondaRecord, TorchRecord, pip_distribution, read_prefix_records, torch_record
from .serve import best_fitting, build_fits, veto_cpu_torch, veto_torch_swap

__all__ = [
    "ACTIVATE",
    "KEEP_STALE",
    "KEEP_STALE_VARIABLE",
    "Command",
    "CommandEdit",
    "CondaSession",
    "PluginSettings",
    "PrefixRecords",
    "Solve",
    "Solver",
    "Spec",
    "conda_command",
    "curated",
    "inactive_hint",
    "refuse_insecure_tls",
    "requirement",
]

#: The one step that makes plain ``conda install`` use cuda-resolve.
ACTIVATE = "conda config --set plugins.cuda_resolve_active true"
#: The setting that leaves extensions pip built for a torch a solve replaces (``.condarc``
#: ``plugins:``); conda reads it from ``CONDA_PLUGINS_CUDA_RESOLVE_KEEP_STALE`` too (a comma
#: list), its own form for every plugin setting.
KEEP_STALE = "cuda_resolve_keep_stale"
KEEP_STALE_VARIABLE = f"CONDA_PLUGINS_{KEEP_STALE.upper()}"


@frozen
class PluginSettings:
    """The plugin's settings (``plugins:`` in ``.condarc``) and conda's TLS and proxies."""

    active: bool = False
    channel: str = ""  # the local channel's folder ("": the default)
    arch_list: str = ""  # build for these capabilities instead of this machine's GPUs
    sources: tuple[tuple[str, str], ...] = ()  # package -> source folder or archive
    #: extensions pip built for a torch a solve replaces, left as they are (not refused)
    keep_stale: tuple[str, ...] = ()
    ssl_verify: bool | str = True  # conda's ssl_verify: a bool, "truststore" or a CA path
    proxy_servers: tuple[tuple[str, str], ...] = ()  # scheme -> proxy URL


@frozen
class Spec:
    """A spec of the command, as the user wrote it and as conda parsed it."""

    text: str
    name: str
    version: str = ""  # conda's version expression ("" or "*": any)


@frozen
class Command:
    """The conda command a pre-command hook sees."""

    name: str  # install, create, update, remove
    prefix: Path  # its target environment
    specs: tuple[Spec, ...] = ()
    dry_run: bool = False
    remove_all: bool = False  # conda remove --all
    #: where the command's packages come from, as the user gave it (``--override-channels``,
    #: ``-c URL`` ...): a command a hint names repeats it, so that it solves as this one did
    channel_options: tuple[str, ...] = ()


@frozen
class CommandEdit:
    """What the pre-command changes in conda's command (conda then solves it)."""

    specs: tuple[str, ...] | None = None  # the command's specs now (None: unchanged)
    add_channel: str | None = None  # after the command's own channels
    dry_run_done: bool = False  # a dry run said what it would build: the command stops here


@frozen
class Solve:
    """A solve's result, before conda's transaction changes anything."""

    prefix: Path
    link: tuple[CondaRecord, ...]
    unlink: tuple[CondaRecord, ...] = ()
    dry_run: bool = False


class Solver(Protocol):
    """What the command's solves read."""

    def channel_records(self, spec: Spec) -> Sequence[CondaRecord]:
        """The configured channels' records for ``spec`` (empty when they cannot be read)."""
        ...

    def see_pip_records(self) -> None:
        """Make pip's packages records in this command's solves (the pin of a package built
        against pip's torch names that torch)."""
        ...


class PrefixRecords(Protocol):
    """An environment's records (with the URL each came from) and its conda variables."""

    def records(self, prefix: Path) -> Sequence[CondaRecord]: ...

    def env_vars(self, prefix: Path) -> dict[str, str]: ...

    def set_env_vars(self, prefix: Path, variables: Mapping[str, str]) -> None: ...

    def unset_env_vars(self, prefix: Path, names: Sequence[str]) -> None: ...


#: detect_environment for an interpreter (None: the running one).
Probe = Callable[[str | None], Environment]


def _detect(python: str | None) -> Environment:
    from ..detect import detect_environment

    return detect_environment(python=python)


def _default_index() -> Index:
    from ..index import default_index

    return default_index()


@frozen(kw_only=False, slots=False)
class _Deferred:
    """Names taken out of a command's specs, to be built against the torch the command brings
    and installed after it (``conda create -n x pytorch kaolin``)."""

    command: str
    prefix: Path
    specs: tuple[str, ...]  # as the user wrote them (the command that finishes the job names them)
    requirements: tuple[str, ...]  # the same as PEP 508 requirements for cuda-resolve's planner
    channel_options: tuple[str, ...] = ()  # the command's (Command.channel_options)

    def again(self, verb: str, words: Sequence[str]) -> str:
        """A conda command a hint names for this prefix, with the command's channel options."""
        return conda_command(verb, self.prefix, self.channel_options, words)


def conda_command(
    verb: str, prefix: Path, channel_options: Sequence[str], words: Sequence[str]
) -> str:
    """``conda VERB -p PREFIX [channel options] WORDS``, quoted for a shell (pasteable)."""
    return shlex.join(["conda", verb, "-p", str(prefix), *channel_options, *words])


def curated(names: Sequence[str], index: Index) -> list[str]:
    """The names in ``index`` that are extensions cuda-resolve builds or whose prebuilt wheels
    it knows (not torch)."""
    from ..install.prepare import TORCH_FAMILY

    picked = []
    for name in names:
        package = index.package(name)
        if (
            package is not None
            and name not in (*TORCH_FAMILY, "pytorch")
            and (package.recipes or package.wheels)
        ):
            picked.append(name)
    return picked


def inactive_hint(names: Sequence[str], index: Index) -> str | None:
    """The hint for a package conda did not find that cuda-resolve could build (None: none)."""
    found = curated(names, index)
    if not found:
        return None
    return (
        f"cuda-resolve can build {', '.join(found)} for this environment's torch and GPUs, "
        f"but its conda plugin is not active: {ACTIVATE} (or: conda cuda activate), "
        "then run this command again"
    )


def requirement(spec: Spec) -> str:
    """A conda spec's name and version as a PEP 508 requirement for cuda-resolve's resolver
    (``pointnet2_ops=3.0`` -> ``pointnet2_ops==3.0.*``); a build string has no PEP 440 meaning."""
    from packaging.specifiers import InvalidSpecifier, SpecifierSet

    if not spec.version or spec.version == "*":
        return spec.name
    parts = spec.version.split(",")
    text = ",".join(part if part[:1] in "<>=!~" else f"=={part}" for part in parts)
    try:
        SpecifierSet(text)
    except InvalidSpecifier:
        raise UsageError(
            f"{spec.text}: cuda-resolve cannot read the version {spec.version!r} "
            "as a PEP 440 specifier",
            hint=f"write it as {spec.name}=X.Y or '{spec.name}>=X.Y'",
        ) from None
    return f"{spec.name}{text}"


def refuse_insecure_tls(settings: PluginSettings, environ: MutableMapping[str, str]) -> None:
    """``ssl_verify: false`` is refused (cuda-resolve never downloads without verifying TLS); a
    CA path and conda's proxies reach the builds' downloads through ``environ``."""
    verify = settings.ssl_verify
    if verify is False:
        raise UsageError(
            "ssl_verify is false in your conda configuration: "
            "cuda-resolve never downloads without verifying TLS",
            hint="set ssl_verify: truststore (the system's trust store) or the path of your CA "
            "bundle: conda config --set ssl_verify truststore",
        )
    if isinstance(verify, str) and verify != "truststore" and Path(verify).exists():
        # A CA path from .condarc reaches the builds' downloads (requests and pip read these).
        environ.setdefault("REQUESTS_CA_BUNDLE", verify)
        environ.setdefault("PIP_CERT", verify)
    for scheme, proxy in settings.proxy_servers:
        if scheme in ("http", "https"):
            environ.setdefault(f"{scheme.upper()}_PROXY", proxy)


def _env_vars_marker(prefix: Path) -> Path:
    """What the plugin set in the environment's conda variables (so that it unsets only that);
    not ``*.json``: conda reads those as records."""
    return prefix / "conda-meta" / "cuda-resolve-env-vars"


def _pinned(name: str, version: str, build: str) -> str:
    """The spec of exactly this record, so no other channel's build of it is taken instead."""
    return f"{name}[version='=={version}',build={build}]"


def _pin(specs: Sequence[Spec], texts: Sequence[str], name: str, pin: str) -> list[str]:
    """``texts`` (the specs as the command has them now) with ``name``'s replaced by ``pin``."""
    return [pin if spec.name == name else text for spec, text in zip(specs, texts, strict=True)]


def _from_channel(prefix: Path, url: str) -> set[str]:
    """The names of ``prefix``'s packages that came from the channel at ``url`` (a record that
    cannot be read is not ours: conda reports it itself)."""
    found = set()
    for path in (prefix / "conda-meta").glob("*.json"):
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if isinstance(data, dict) and str(data.get("url") or data.get("channel") or "").startswith(
            url
        ):
            found.add(str(data.get("name")))
    return found


@dataclass(kw_only=True, eq=False)
class CondaSession:
    """The state between the hooks of one conda command, and what each hook decides."""

    solver: Solver
    install: CondaInstall
    prefixes: PrefixRecords
    reporter: Reporter = field(default_factory=NullReporter)
    probe: Probe = _detect
    index: Callable[[], Index] = _default_index
    environ: MutableMapping[str, str] = field(default_factory=lambda: os.environ)
    #: The command's deferred names (at most one entry: one conda command per process).
    deferred: list[_Deferred] = field(default_factory=list)
    #: What this command built into the local channel: (prefix, the package file).
    built: list[tuple[Path, Path]] = field(default_factory=list)
    #: The command the pre-command saw (the veto's hints repeat it).
    command: Command | None = None

    # -- the pre-command ----------------------------------------------------------------------

    def before_command(self, command: Command, settings: PluginSettings) -> CommandEdit | None:
        """For each name cuda-resolve curates: pin a fitting channel build, or build one into
        the local channel and pin it, or (the torch comes with the command) take the name out
        and remember it for :meth:`after_command`. None: the plugin is not active."""
        if not settings.active:
            return None
        self.command = command
        channel = self._keep_solvable(command, settings)
        if not command.specs or command.name == "remove":
            return CommandEdit(add_channel=channel)
        index = self.index()
        names = curated([spec.name for spec in command.specs], index)
        if not names:
            return CommandEdit(add_channel=channel)
        edit = self._serve(command, settings, index, names)
        return CommandEdit(
            specs=edit.specs,
            add_channel=edit.add_channel or channel,
            dry_run_done=edit.dry_run_done,
        )

    def _keep_solvable(self, command: Command, settings: PluginSettings) -> str | None:
        """Every later solve of an environment that has packages from the local channel sees
        that channel (their records must have candidates) and pip's torch (their pin names it),
        except a remove of those packages themselves: there a solver counts pip's torch as a
        dependency left over and plans to remove it too (and conda's own pypi records carry
        pip's files). Returns the channel to add."""
        prefix = command.prefix
        if not (prefix / "conda-meta").is_dir():
            return None
        channel = LocalChannel.default(settings.channel)
        ours = _from_channel(prefix, channel.url)
        if not ours:
            return None
        if command.name == "remove" and (
            {spec.name for spec in command.specs} & ours or command.remove_all
        ):
            return channel.url
        if pip_distribution(prefix, "torch") is not None:
            self.solver.see_pip_records()
        return channel.url

    def _serve(
        self, command: Command, settings: PluginSettings, index: Index, names: list[str]
    ) -> CommandEdit:
        prefix = command.prefix
        torch = torch_record(prefix) if prefix.is_dir() else None
        # The torch the build pairs with comes with this command (a new environment, none yet,
        # or a torch spec in the command): channel builds are judged without it, ours wait.
        torch_changes = (
            command.name == "create"
            or torch is None
            or any(spec.name in ("pytorch", "torch") for spec in command.specs)
        )
        channel = LocalChannel.default(settings.channel)
        texts, to_build = self._pin_fitting(
            command, None if torch_changes else torch, index, names, channel
        )
        if torch is not None and torch.source == "pip":
            self.solver.see_pip_records()  # the pin of a fitting build, or of ours, names it
        if not to_build:
            return CommandEdit(specs=tuple(texts))
        requirements = [requirement(spec) for spec in command.specs if spec.name in to_build]
        if torch_changes:
            return self._defer(command, texts, to_build, requirements)
        assert torch is not None
        if command.dry_run:
            self.reporter.step(
                f"would build {', '.join(requirements)} against {torch.describe()} into the "
                f"local channel {channel.url} (conda cuda plan -p {shlex.quote(str(prefix))} "
                f"{' '.join(to_build)} shows the build)"
            )
            return CommandEdit(specs=tuple(texts), dry_run_done=True)
        for item in self._build(prefix, requirements, index, channel, settings):
            pin = _pinned(item.package.name, item.package.version, item.package.build)
            texts = _pin(command.specs, texts, item.package.name, pin)
            self.built.append((prefix, item.path))
        return CommandEdit(specs=tuple(texts), add_channel=channel.url)

    def _pin_fitting(
        self,
        command: Command,
        judged: TorchRecord | None,
        index: Index,
        names: list[str],
        channel: LocalChannel,
    ) -> tuple[list[str], list[str]]:
        """The command's specs with each name a channel build serves pinned to the best one,
        and the names no channel build serves."""
        python = command.prefix / "bin" / "python"
        found = python if python.exists() else None
        running = found is not None and Path(sys.executable).absolute() == found.absolute()
        env = self.probe(None if running or found is None else str(found))
        texts = [spec.text for spec in command.specs]
        to_build = []
        for spec in command.specs:
            if spec.name not in names:
                continue
            fits = [
                build_fits(record, env, judged, index)
                for record in self.solver.channel_records(spec)
                if not record.channel.startswith(channel.url)
            ]
            best = best_fitting(fits)
            if best is not None:
                self.reporter.step(f"the channel build {best.describe()}")
                pin = _pinned(spec.name, best.record.version, best.record.build)
                texts = _pin(command.specs, texts, spec.name, pin)
                continue
            for fit in fits:
                self.reporter.step(fit.describe())
            to_build.append(spec.name)
        return texts, to_build

    def _defer(
        self, command: Command, texts: list[str], names: list[str], requirements: list[str]
    ) -> CommandEdit:
        """Take ``names`` out of the command's specs: conda solves and installs the rest, torch
        included; :meth:`after_command` then builds them against that torch and installs them
        through conda. :meth:`veto` refuses, before anything is installed, a solve that brings
        no CUDA torch to build against."""
        paired = list(zip(command.specs, texts, strict=True))
        taken = [text for spec, text in paired if spec.name in names]
        rest = [text for spec, text in paired if spec.name not in names]
        if not rest:
            raise UsageError(
                f"{', '.join(names)} must be built against the torch this command installs, "
                "and it installs nothing else: nothing was changed",
                hint="name the torch too: "
                + conda_command(
                    command.name, command.prefix, command.channel_options, ["pytorch", *taken]
                ),
            )
        self.deferred.append(
            _Deferred(
                command=command.name,
                prefix=command.prefix,
                specs=tuple(taken),
                requirements=tuple(requirements),
                channel_options=command.channel_options,
            )
        )
        self.reporter.step(
            f"no channel build of {', '.join(names)} fits this machine; conda installs the rest "
            "first, then cuda-resolve builds them against the torch it brought and installs "
            "them through conda"
        )
        return CommandEdit(specs=tuple(rest))

    def _build_options(self, settings: PluginSettings) -> tuple[InstallOptions, str | None]:
        """The build options and arch list from the settings (TLS and proxies checked first: a
        build downloads)."""
        refuse_insecure_tls(settings, self.environ)
        sources = tuple((name, Path(folder).expanduser()) for name, folder in settings.sources)
        options = InstallOptions(source_dirs=sources, explicit_arch_list=bool(settings.arch_list))
        return options, settings.arch_list or None

    def _build(
        self,
        prefix: Path,
        requirements: Sequence[str],
        index: Index,
        channel: LocalChannel,
        settings: PluginSettings,
    ) -> list[ChannelBuild]:
        """Build (or fetch) ``requirements`` for the environment's torch into the local channel."""
        options, arch_list = self._build_options(settings)
        return build_into_channel(
            list(requirements),
            prefix,
            channel=channel,
            index=index,
            options=options,
            arch_list=arch_list,
            reporter=self.reporter,
        )

    # -- the post-solve -----------------------------------------------------------------------

    def veto(self, solve: Solve, settings: PluginSettings) -> None:
        """Refuse, before conda's transaction changes anything, a solve that leaves no CUDA torch
        for deferred names, that brings a channel's pytorch over pip's torch that packages were
        built against, or that installs a CPU-only pytorch on a machine with GPUs."""
        if not settings.active:
            return
        replaced = self._replaced_torch(solve)
        if replaced is not None:  # first: what it carries along is checked with the deferred
            self._carry_built(solve, *replaced, settings)
        if self.deferred:
            self._check_deferred(self.deferred[-1], solve)
        pytorch = [record for record in solve.link if record.name == "pytorch"]
        if not pytorch:
            return
        if (solve.prefix / "conda-meta").is_dir():
            installed = read_prefix_records(solve.prefix)
            swap = veto_torch_swap(pytorch, installed, torch_record(solve.prefix, installed))
            if swap:
                raise UsageError(
                    swap,
                    hint="conda remove those packages first (conda install builds them again "
                    "for the new torch), or keep pip's torch",
                )
        if replaced is not None:
            self._refuse_pip_extensions(solve, *replaced, settings)
        reason = veto_cpu_torch(self.probe(None), pytorch)
        if reason:
            raise UsageError(
                reason,
                hint="ask for a CUDA build: conda install 'pytorch=*=cuda*' (with conda-forge), "
                "or set CONDA_OVERRIDE_CUDA if __cuda is missing",
            )

    @staticmethod
    def _replaced_torch(solve: Solve) -> tuple[TorchRecord, TorchRecord] | None:
        """(the environment's torch, the channel's pytorch the solve brings instead) when the
        solve replaces one torch build with another (issue 27); None when it keeps it."""
        incoming = [record for record in solve.link if record.name == "pytorch"]
        if not incoming or not (solve.prefix / "conda-meta").is_dir():
            return None
        current = torch_record(solve.prefix)
        new = TorchRecord.from_channel_record(incoming[-1])
        if current is None or (current.name, current.version, current.build) == (
            new.name,
            new.version,
            new.build,
        ):
            return None
        return current, new

    def _carry_built(
        self, solve: Solve, current: TorchRecord, new: TorchRecord, settings: PluginSettings
    ) -> None:
        """The packages cuda-resolve built into the local channel against the channel's torch
        the solve replaces, which the solve removes (their pin names the old torch) or leaves:
        carried along, built again for the new torch after the command and installed through
        conda (the deferral a command naming them gets). Those built against pip's torch are
        :func:`veto_torch_swap`'s to refuse."""
        if current.source != "channel":
            return
        from packaging.requirements import Requirement
        from packaging.utils import canonicalize_name

        relinked = {record.name for record in solve.link}
        built = [
            name
            for name in _built_for(read_prefix_records(solve.prefix), current, settings)
            if name not in relinked
        ]
        last = self.deferred[-1] if self.deferred else None
        if last is not None and last.prefix != solve.prefix:
            last = None
        taken = (
            {canonicalize_name(Requirement(text).name) for text in last.requirements}
            if last
            else set()
        )
        names = sorted(name for name in built if canonicalize_name(name) not in taken)
        if not names:
            return
        command = self.command.name if self.command is not None else "install"
        options = self.command.channel_options if self.command is not None else ()
        carried = _Deferred(
            command=last.command if last else command,
            prefix=solve.prefix,
            specs=(*(last.specs if last else ()), *names),
            requirements=(*(last.requirements if last else ()), *names),
            channel_options=last.channel_options if last else options,
        )
        if last is not None:
            self.deferred[-1] = carried
        else:
            self.deferred.append(carried)
        self.reporter.step(
            f"{', '.join(names)} {'was' if len(names) == 1 else 'were'} built by cuda-resolve "
            f"for {current.describe()}, which this solve replaces with {new.describe()}: "
            "carried along (built again for the new torch after the command, installed "
            "through conda)"
        )

    def unsatisfiable_hint(self, settings: PluginSettings) -> str | None:
        """The way through when conda's solver refused this command as unsatisfiable because
        it asks for another torch than the one packages cuda-resolve built pin (None: not that
        case). conda keeps a package the user asked for (its history) and the exact torch its
        record pins, so neither solver can change torch under it and the post-solve never
        runs: remove them first; the install that names them with the new torch then builds
        them again for it (the deferral of :meth:`before_command`)."""
        command = self.command
        if not settings.active or command is None or command.name not in ("install", "update"):
            return None
        prefix = command.prefix
        if not (prefix / "conda-meta").is_dir():
            return None
        records = read_prefix_records(prefix)
        current = torch_record(prefix, records)
        if current is None:
            return None
        asked = [parse_spec(spec.text) for spec in command.specs if spec.name == current.name]
        if not asked or all(
            spec.matches(current.name, current.version, current.build) for spec in asked
        ):
            return None
        names = _built_for(records, current, settings)
        if not names:
            return None
        them = "it" if len(names) == 1 else "them"
        remove = shlex.join(["conda", "remove", "-p", str(prefix), *names])
        install = conda_command(
            command.name,
            prefix,
            command.channel_options,
            [*(spec.text for spec in command.specs if spec.name not in names), *names],
        )
        return (
            f"{', '.join(names)} {'was' if len(names) == 1 else 'were'} built by cuda-resolve "
            f"for {current.describe()}, and conda keeps {them} as asked for, with the torch "
            f"{'its' if len(names) == 1 else 'their'} record pins; remove {them} first, and "
            f"the install builds {them} again for the new torch: {remove} && {install}"
        )

    def _refuse_pip_extensions(
        self, solve: Solve, current: TorchRecord, new: TorchRecord, settings: PluginSettings
    ) -> None:
        """Refuse a solve that replaces torch under extensions pip installed (``conda cuda
        install``, cuda-pip) and built for the old one: conda does not know they link it, and
        their next import fails with 'undefined symbol'. The setting ``cuda_resolve_keep_stale``
        (``.condarc``, or ``CONDA_PLUGINS_CUDA_RESOLVE_KEEP_STALE=NAME,...`` for one command)
        leaves them as they are (``conda cuda install --repair`` rebuilds them after)."""
        from packaging.utils import canonicalize_name

        from ..install.stale import stale_extensions

        python = solve.prefix / "bin" / "python"
        if not python.exists():
            return
        running = Path(sys.executable).absolute() == python.absolute()
        env = self.probe(None if running else str(python))
        stale = [
            s
            for s in stale_extensions(env, self.index())
            if pip_distribution(solve.prefix, s.name) is not None
        ]
        refused = [s for s in stale if not s.matches(settings.keep_stale)]
        repair = f"conda cuda install -p {shlex.quote(str(solve.prefix))} --repair"
        if not refused:
            if stale:
                names = ", ".join(_shown(s.name, s.version) for s in stale)
                self.reporter.note(
                    f"{names} stay built for {current.describe()} (plugins.{KEEP_STALE}): "
                    f"after this command, {repair} rebuilds them for the new torch"
                )
            return
        shown = ", ".join(_shown(s.name, s.version) for s in refused)
        them = ",".join(str(canonicalize_name(s.name)) for s in refused)
        command = self.command
        again = (
            conda_command(
                command.name,
                solve.prefix,
                command.channel_options,
                [spec.text for spec in command.specs],
            )
            if command is not None and command.prefix == solve.prefix
            else "the same conda command"
        )
        raise UsageError(
            f"this solve replaces {current.describe()} with {new.describe()} in {solve.prefix}, "
            f"and {shown} (installed by pip) {'was' if len(refused) == 1 else 'were'} built "
            "for the old torch: conda does not know they link it, and at their next import "
            "they fail with 'undefined symbol' (torch's C++ ABI changes between builds); "
            "nothing was changed. The plugin's setting "
            f"{KEEP_STALE} leaves named extensions as they are in every command "
            f"(conda config --append plugins.{KEEP_STALE} NAME)",
            hint=f"to change torch and rebuild them for the new one: {KEEP_STALE_VARIABLE}="
            f"{them} {again} && {repair}",
        )

    def _check_deferred(self, deferred: _Deferred, solve: Solve) -> None:
        """The solve must leave a CUDA torch in the environment for the deferred names to be
        built against (else they could never be installed, and the command would stop
        half-way)."""
        incoming = [record for record in solve.link if record.name == "pytorch"]
        torch: TorchRecord | None
        if incoming:
            torch = TorchRecord.from_channel_record(incoming[-1])
        else:
            meta = deferred.prefix / "conda-meta"
            current = torch_record(deferred.prefix) if meta.is_dir() else None
            leaving = {record.name for record in solve.unlink}
            torch = current if current is not None and current.name not in leaving else None
        fix = deferred.again(deferred.command, ["pytorch=*=cuda*", *deferred.specs])
        if torch is None:
            raise UsageError(
                f"{', '.join(deferred.specs)} must be built against the environment's torch, "
                f"and this solve leaves none in {deferred.prefix}: nothing was changed",
                hint=f"add a CUDA build of pytorch to the command: {fix}",
            )
        if torch.is_cpu_only:
            raise UsageError(
                f"{', '.join(deferred.specs)} must be built against a CUDA torch, and this "
                f"solve gives {deferred.prefix} {torch.describe()}: nothing was changed",
                hint=f"ask for a CUDA build: {fix}",
            )
        if solve.dry_run:
            self.reporter.step(
                f"after this, {', '.join(deferred.specs)} would be built against "
                f"{torch.describe()} and installed through conda"
            )

    # -- the post-command ---------------------------------------------------------------------

    def after_command(self, settings: PluginSettings, channels: Sequence[str]) -> None:
        """Build and install the names the pre-command deferred, against the torch the command
        just installed (through ``channels`` after the local one). Then conda variables for
        what was built into the environment: CUDA_HOME (the toolkit it was built with) and
        TORCH_CUDA_ARCH_LIST (what it was built for), so a later build in the environment and
        a Slurm job see the same."""
        if self.deferred:
            self._finish(self.deferred.pop(), settings, channels)
        if not self.built:
            return
        prefix, path = self.built[-1]
        self.built.clear()
        from .package import read_package_info

        _, ours = read_package_info(path)
        if ours.get("downloaded_from"):
            return  # a prebuilt wheel: nothing was compiled here, no toolkit or arch list
        variables = {"TORCH_CUDA_ARCH_LIST": str(ours.get("built_for") or ours.get("arch_list"))}
        if ours.get("toolkit"):
            variables["CUDA_HOME"] = str(ours["toolkit"])
        self.prefixes.set_env_vars(prefix, variables)
        _env_vars_marker(prefix).write_text(json.dumps(variables, indent=1, sort_keys=True))
        self.reporter.step(
            "set "
            + ", ".join(f"{name}={value}" for name, value in variables.items())
            + f" for {prefix} (conda env config vars list)"
        )

    def _finish(
        self, deferred: _Deferred, settings: PluginSettings, channels: Sequence[str]
    ) -> None:
        """Build the deferred names against the torch the environment now has and install them
        through conda (its solver, whichever the user runs, and its transaction, which undoes
        itself on failure). If that fails, the environment holds what the command installed
        and nothing of ours: the error says so and names the one command that finishes the
        job."""
        prefix = deferred.prefix
        channel = LocalChannel.default(settings.channel)
        finish = deferred.again("install", deferred.specs)
        try:
            self._install_with_backend(deferred, channel, settings, channels)
        except (CudaResolveError, OSError) as error:
            message = error.message if isinstance(error, CudaResolveError) else str(error).strip()
            hint = error.hint if isinstance(error, CudaResolveError) else None
            records = read_prefix_records(prefix) if (prefix / "conda-meta").is_dir() else ()
            torch = torch_record(prefix, records) if records else None
            among = f", {torch.describe()} among them" if torch else ""
            verb = "is" if len(deferred.specs) == 1 else "are"
            raise UsageError(
                f"conda {deferred.command} finished: {prefix} exists with {len(records)} conda "
                f"package(s){among}; but {', '.join(deferred.specs)} {verb} not installed in "
                f"it: {message}",
                hint=f"{hint}; then finish with: {finish}" if hint else f"finish with: {finish}",
            ) from None

    def _install_with_backend(
        self,
        deferred: _Deferred,
        channel: LocalChannel,
        settings: PluginSettings,
        channels: Sequence[str],
    ) -> None:
        """Plan the deferred requirements against the torch the prefix has and carry the plan
        out with the conda-channel backend (builds or downloads, conversion, conda's own
        transaction)."""
        prefix, requirements = deferred.prefix, deferred.requirements
        torch, _ = environment_torch(prefix, requirements)
        if torch.source == "pip":
            self.solver.see_pip_records()  # the packages' pin names pip's torch
        python = prefix_python(prefix)
        running = Path(sys.executable).absolute() == python.absolute()
        env = self.probe(None if running else str(python))
        options, arch_list = self._build_options(settings)
        self.reporter.step(
            f"building {', '.join(requirements)} against {torch.describe()} in {prefix}"
        )
        index = self.index()
        plan = channel_plan(
            requirements, env, torch, index, options, arch_list=arch_list, reporter=self.reporter
        )
        backend = CondaChannelBackend(
            prefix=prefix, channel=channel, install=self.install, channels=tuple(channels)
        )
        try:
            result = backend.execute(
                plan, env, index=index, options=options, reporter=self.reporter
            )
        except CudaResolveError as error:  # a build's hint, in conda's terms
            raise in_conda_words(error, requirements) from None
        ours = {name for name, _, after in result.changed if after is not None}
        for record in read_prefix_records(prefix):
            if record.name in ours:
                self.built.append((prefix, channel.root / record.subdir / record.fn))

    # -- after a remove -----------------------------------------------------------------------

    def after_remove(self, prefix: Path, settings: PluginSettings) -> None:
        """Unset the variables a build set once no package of the local channel is left, unless
        the user changed them since."""
        marker = _env_vars_marker(prefix)
        if not marker.is_file():
            return
        channel = LocalChannel.default(settings.channel)
        if any(record.url.startswith(channel.url) for record in self.prefixes.records(prefix)):
            return
        ours = json.loads(marker.read_text())
        current = self.prefixes.env_vars(prefix)
        names = [name for name, value in ours.items() if current.get(name) == value]
        if names:
            self.prefixes.unset_env_vars(prefix, names)
            self.reporter.step(
                f"unset {', '.join(names)} for {prefix} (nothing built by cuda-resolve is left)"
            )
        marker.unlink()


def _built_for(
    records: Sequence[CondaRecord], torch: TorchRecord, settings: PluginSettings
) -> list[str]:
    """The names of the packages in ``records`` that cuda-resolve built into the local channel
    against ``torch`` (their pin names it)."""
    url = LocalChannel.default(settings.channel).url
    return [
        record.name
        for record in records
        if (record.url or record.channel).startswith(url)
        and any(
            spec.matches(torch.name, torch.version, torch.build)
            for spec in record.dependency(torch.name)
        )
    ]


def _shown(name: str, version: str | None) -> str:
    return f"{name} {version}" if version else name
