"""The conda-channel installer backend: a complete plan carried out into a conda environment
through conda, instead of through the environment's pip.

Where the pip backend (:func:`cuda_resolve.install.transaction.execute`) runs pip and undoes a
failed install from its stash, this backend builds the plan's extensions (the wheelhouse's hits
included) and fetches its prebuilt wheels, converts each into a package of the local channel
pinned to the environment's torch record (:mod:`cuda_resolve.conda.convert`), and hands the
exact records to conda's own solver and transaction. The undo is that transaction's: conda
rolls back what it linked when it fails, and nothing else in the environment was touched
(the channel keeps the packages, which a later install reuses).

cuda-resolve does not import conda (it is not on PyPI): the caller supplies
:class:`CondaInstall`, the function that runs conda's transaction. The conda plugin passes one
that uses ``conda.api.Solver``; tests pass py-rattler's solver and installer.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Protocol

from .._frozen import frozen
from ..environment import Environment
from ..errors import CudaResolveError, InstallError
from ..index.model import Index
from ..install.options import InstallOptions
from ..install.transaction import InstallResult
from ..net.client import HttpClient
from ..plan import Plan
from ..reporting import NullReporter, Reporter
from ..wheelhouse.store import Wheelhouse
from .channel import LocalChannel
from .convert import ChannelBuild, package_plan
from .package import CondaPackage
from .records import read_prefix_records

__all__ = ["CondaChannelBackend", "CondaInstall", "exact_spec"]


class CondaInstall(Protocol):
    """Install ``specs`` into ``prefix`` from ``channels`` (the local channel first) in one
    transaction of conda's; raises when it fails, after conda has undone what it did."""

    def __call__(self, prefix: Path, channels: Sequence[str], specs: Sequence[str]) -> None: ...


def exact_spec(package: CondaPackage) -> str:
    """The match spec of exactly this record (no other channel's build of the name can answer
    it)."""
    return f"{package.name}[version='=={package.version}',build={package.build}]"


def _installed(prefix: Path) -> dict[str, str]:
    return {
        record.name: f"{record.version} {record.build}" for record in read_prefix_records(prefix)
    }


@frozen(slots=False)
class CondaChannelBackend:
    """Carry out complete plans into the conda environment at ``prefix`` (see the module doc)."""

    prefix: Path
    channel: LocalChannel
    install: CondaInstall
    channels: tuple[str, ...] = ()  # the command's other channels, after the local one
    client: HttpClient | None = None

    name = "conda-channel"

    def execute(
        self,
        plan: Plan,
        env: Environment,
        *,
        index: Index,
        options: InstallOptions,
        wheelhouse: Wheelhouse | None = None,
        reporter: Reporter | None = None,
        environ: Mapping[str, str] | None = None,
    ) -> InstallResult:
        """Build or fetch, convert, and install ``plan``'s extensions through conda; the result
        says what conda changed (``name``: ``version build`` before and after)."""
        if not plan.complete:
            raise InstallError(
                "the plan is not complete (no builds or pip steps decided)",
                hint="complete it with cuda_resolve.install.prepare.complete_plan before "
                "executing it",
            )
        report = reporter or NullReporter()
        base = dict(os.environ if environ is None else environ)
        built: list[ChannelBuild] = package_plan(
            plan,
            env,
            self.prefix,
            channel=self.channel,
            index=index,
            options=options,
            reporter=report,
            environ=base,
            client=self.client,
            wheelhouse=wheelhouse,
        )
        before = _installed(self.prefix)
        specs = [exact_spec(item.package) for item in built]
        if specs:
            report.step(
                f"installing {', '.join(item.package.name for item in built)} into {self.prefix} "
                "through conda"
            )
            try:
                self.install(
                    self.prefix, list(dict.fromkeys((self.channel.url, *self.channels))), specs
                )
            except CudaResolveError:
                raise
            except Exception as exc:
                raise InstallError(
                    f"conda could not install {', '.join(specs)} into {self.prefix}: "
                    f"{str(exc).strip() or type(exc).__name__}",
                    hint="conda's transaction undid what it had done; the packages stay in the "
                    f"local channel {self.channel.url}",
                ) from exc
        after = _installed(self.prefix)
        changed = tuple(
            (name, before.get(name), after.get(name))
            for name in sorted(set(before) | set(after))
            if before.get(name) != after.get(name)
        )
        notes = tuple(
            f"{item.package.name} {item.package.version} ({item.package.build}) from the local "
            f"channel {self.channel.url}: "
            + (
                f"the prebuilt wheel {item.downloaded_from}"
                if item.downloaded_from
                else f"built{' (a wheelhouse hit)' if item.cache_hit else ''}, {item.wheel.name}"
            )
            for item in built
        )
        return InstallResult(plan=plan, builds=(), changed=changed, verified=(), notes=notes)
