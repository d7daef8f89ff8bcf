"""The hooks conda loads (entry-point group ``conda``). Each hook only names its action; the
actions (:mod:`conda_plugin.actions`, which turn conda's objects into plain data for
:mod:`cuda_resolve.conda.session`, where the decisions are) and cuda-resolve itself are imported
when a hook runs, so loading the plugin costs conda's start-up almost nothing (measured in
docs/conda.md).

What is registered, and why, is in docs/conda.md:

- ``conda cuda doctor|detect|plan|install|build|channel|activate``: cuda-resolve's commands with
  the environment conda names (``-n``, ``-p``, else the active one) as the target;
- settings under ``plugins:`` in ``.condarc`` (``cuda_resolve_active`` is the one step that
  makes plain ``conda install`` use cuda-resolve);
- a pre-command for ``install``/``create``/``update``: where no channel build fits, build into
  the local channel and point the command at it (conda's solver and transaction do the rest);
  where the torch to build against comes with the command (``conda create -n x pytorch
  kaolin``), take the names out of it and build and install them in the post-command, through
  conda's own solver and transaction;
- a post-solve veto: no CPU-only pytorch on a GPU machine; no torch change under extensions
  pip built for the old torch unless ``cuda_resolve_keep_stale`` names them;
- a prefix-data loader: pip's torch visible to the solve (the pin of a package built against it);
- error hints: the plugin installed but not active; a torch change conda's solver refuses
  because packages the plugin built pin the installed torch (remove them, then install
  them with the new torch);
- a ``conda doctor`` health check; conda environment variables after a build.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any, TypeVar, cast

from conda.plugins import hookimpl as _conda_hookimpl

NAME = "cuda-resolve"

_Hook = TypeVar("_Hook", bound=Callable[..., Any])


def hookimpl(function: _Hook) -> _Hook:
    """conda's ``hookimpl`` marker with its type said (conda ships no type information, so
    mypy would see every hook as untyped)."""
    return cast(_Hook, _conda_hookimpl(function))


@hookimpl
def conda_subcommands() -> Iterator[Any]:
    from conda.plugins.types import CondaSubcommand

    def action(argv: tuple[str, ...]) -> int:
        from .actions import subcommand

        return subcommand(argv)

    yield CondaSubcommand(
        name="cuda",
        summary="cuda-resolve: CUDA-aware torch and extension builds for this environment",
        action=action,
    )


@hookimpl
def conda_settings() -> Iterator[Any]:
    from conda.common.configuration import MapParameter, PrimitiveParameter, SequenceParameter
    from conda.plugins.types import CondaSetting

    yield CondaSetting(
        name="cuda_resolve_active",
        parameter=PrimitiveParameter(False, element_type=bool),
        description="conda install/create/update build the CUDA extensions cuda-resolve curates "
        "(pointnet2_ops, kaolin) into a local channel where no channel build fits",
    )
    yield CondaSetting(
        name="cuda_resolve_channel",
        parameter=PrimitiveParameter("", element_type=str),
        description="the folder of cuda-resolve's local conda channel "
        "(default: conda-channel in cuda-resolve's cache folder)",
    )
    yield CondaSetting(
        name="cuda_resolve_arch_list",
        parameter=PrimitiveParameter("", element_type=str),
        description="build for these compute capabilities ('8.0;9.0') "
        "instead of this machine's GPUs",
    )
    yield CondaSetting(
        name="cuda_resolve_sources",
        parameter=MapParameter(PrimitiveParameter("", element_type=str)),
        description="package -> a local source folder or archive to build it from "
        "(as --source PACKAGE=DIR)",
    )
    yield CondaSetting(
        name="cuda_resolve_keep_stale",
        parameter=SequenceParameter(PrimitiveParameter("", element_type=str)),
        description="extensions pip installed (conda cuda install, cuda-pip) that a solve "
        "replacing torch leaves built for the old torch instead of refusing "
        "(as --keep-stale NAME; conda cuda install --repair rebuilds them after)",
    )


@hookimpl
def conda_pre_commands() -> Iterator[Any]:
    from conda.plugins.types import CondaPreCommand

    def action(command: str) -> None:
        from .actions import before_install

        before_install(command)

    yield CondaPreCommand(
        name=NAME, action=action, run_for={"install", "create", "update", "remove"}
    )


@hookimpl
def conda_post_commands() -> Iterator[Any]:
    from conda.plugins.types import CondaPostCommand

    def action(command: str) -> None:
        from .actions import after_install

        after_install(command)

    yield CondaPostCommand(name=NAME, action=action, run_for={"install", "create", "update"})

    def removed(command: str) -> None:
        from .actions import after_remove

        after_remove(command)

    yield CondaPostCommand(name=f"{NAME}-remove", action=removed, run_for={"remove", "uninstall"})


@hookimpl
def conda_post_solves() -> Iterator[Any]:
    from conda.plugins.types import CondaPostSolve

    def action(repodata_fn: str, unlink_precs: Any, link_precs: Any) -> None:
        from .actions import veto_solve

        veto_solve(link_precs, unlink_precs)

    yield CondaPostSolve(name=NAME, action=action)


@hookimpl
def conda_prefix_data_loaders() -> Iterator[Any]:
    from conda.plugins.types import CondaPrefixDataLoader

    def loader(prefix: Any, records: dict[str, Any]) -> dict[str, Any]:
        from .actions import load_pip_torch

        return load_pip_torch(prefix, records)

    yield CondaPrefixDataLoader(name="cuda-resolve-pip-torch", loader=loader)


@hookimpl
def conda_error_hints(error: Any) -> Iterator[Any]:
    from .actions import error_hints

    yield from error_hints(error)


@hookimpl
def conda_health_checks() -> Iterator[Any]:
    from conda.plugins.types import CondaHealthCheck

    def action(prefix: str, verbose: bool) -> None:
        from .actions import health_check

        health_check(prefix, verbose)

    yield CondaHealthCheck(
        name=NAME,
        action=action,
        summary="torch vs the driver, kernels for every GPU, the CUDA toolkit, "
        "extension libraries that will not load",
    )
