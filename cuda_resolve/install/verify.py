"""The checks after pip ran: the torch that landed is the planned build, and every module imports.

:func:`torch_mismatch` reads the installed torch's build from its files (release, variant, CUDA
version: :func:`~cuda_resolve.torch_identity.read_installed_torch`, torch is not imported) and
compares it with the plan; a CPU build, another variant or another release is named with the
source that supplied it (pip's own words about the file it took, ``direct_url.json``, pip's
version of it), and the executor then restores the environment.

The import check: which module did not import, and why.

The target's interpreter imports each module in turn and reports on its own channel: before each
import, and for the first that fails, one line tagged with a fresh random marker, holding JSON
(the module, the exception's type and message). The verdict is read from those lines only, never
from the last line of the output: an import may print warnings (a CUDA driver too old, a
deprecation), garbage or terminal escape sequences, on stdout or stderr, before or after
failing. An interpreter that crashes (a segfault in an extension's initialiser) or ends itself
while importing is named with the module it was importing. Everything shown is made printable.
"""

from __future__ import annotations

import json
import re
import signal
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from .._bounded import run as bounded_run
from .._frozen import frozen
from .._printable import printable
from ..versions import CudaVersion

if TYPE_CHECKING:
    from ..plan import PlanItem
    from ..torch_identity import TorchIdentity

__all__ = [
    "ImportFailure",
    "PlannedTorch",
    "import_failure",
    "planned_torch",
    "torch_mismatch",
    "torch_supplier",
    "verify_imports",
]

#: How much of an exception's message a failure shows (a message can be a whole traceback).
_MESSAGE_LIMIT = 500

_SCRIPT = """\
import importlib, json, sys
marker = sys.argv[1]
def say(**fields):
    # on a line of its own, whatever the import left unfinished on stdout
    sys.__stdout__.write("\\n" + marker + " " + json.dumps(fields) + "\\n")
    sys.__stdout__.flush()
for name in sys.argv[2:]:
    say(importing=name)
    try:
        importlib.import_module(name)
    except BaseException as exc:
        try:
            message = str(exc)
        except BaseException:
            message = "(its message cannot be shown)"
        say(failed=name, type=type(exc).__name__, message=message)
        sys.exit(1)
say(done=True)
"""


@frozen
class ImportFailure:
    """A module that failed to import after an install, and what it printed."""

    module: str | None  # None: the check could not run at all
    reason: str  # printable, one line

    def __str__(self) -> str:
        return f"{self.module}: {self.reason}" if self.module else self.reason


def _reports(stdout: str, marker: str) -> list[dict[str, object]]:
    found: list[dict[str, object]] = []
    prefix = marker + " "
    for line in stdout.splitlines():
        if line.startswith(prefix):
            try:
                value = json.loads(line[len(prefix) :])
            except ValueError:
                continue
            if isinstance(value, dict):
                found.append(value)
    return found


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def _shorten(text: str) -> str:
    text = " / ".join(line.strip() for line in text.strip().splitlines() if line.strip())
    return text if len(text) <= _MESSAGE_LIMIT else text[:_MESSAGE_LIMIT] + " ..."


def import_failure(
    stdout: str, returncode: int | None, marker: str, modules: Sequence[str]
) -> ImportFailure | None:
    """The verdict of one run of the check (its stdout, exit status and marker): None when every
    module imported."""
    reports = _reports(stdout, marker)
    failed = next((r for r in reports if "failed" in r), None)
    if failed is not None:
        kind = printable(str(failed.get("type", "Exception")), one_line=True)
        message = printable(_shorten(str(failed.get("message", ""))), one_line=True)
        return ImportFailure(
            module=printable(str(failed["failed"]), one_line=True),
            reason=f"{kind}: {message}" if message else kind,
        )
    if returncode == 0 and any(r.get("done") is True for r in reports):
        return None
    importing = [str(r["importing"]) for r in reports if "importing" in r]
    module = printable(importing[-1], one_line=True) if importing else None
    where = "while importing it" if module else f"before importing anything ({', '.join(modules)})"
    if returncode is None:
        reason = f"the import check was stopped {where}: it ran too long or wrote too much"
    elif returncode < 0:
        reason = f"the interpreter crashed with {_signal_name(-returncode)} {where}"
    else:
        reason = f"the interpreter ended with exit {returncode} {where}"
    return ImportFailure(module=module, reason=printable(reason, one_line=True))


def verify_imports(
    python: str, modules: Sequence[str], environ: Mapping[str, str], *, timeout: float
) -> ImportFailure | None:
    """None when every module in ``modules`` imports in a fresh ``python``, else which did not
    and why."""
    import secrets  # imported where used: plan and doctor never load it (issue 28)

    marker = f"cuda-resolve-import-check-{secrets.token_hex(8)}"
    done = bounded_run(
        [python, "-c", _SCRIPT, marker, *modules], timeout=timeout, env=environ, cwd="/"
    )
    if done is None:
        return ImportFailure(
            module=None,
            reason=f"{printable(python, one_line=True)} could not be started for the import check",
        )
    return import_failure(done.stdout, done.returncode, marker, modules)


# -- the torch that landed ------------------------------------------------------------------


@frozen
class PlannedTorch:
    """The torch build a plan leaves installed: its release and variant (``cu130``, ``cpu``)."""

    release: str
    variant: str | None

    @property
    def label(self) -> str:
        return f"{self.release}+{self.variant}" if self.variant else self.release


def planned_torch(items: Sequence[PlanItem]) -> PlannedTorch | None:
    """What the plan's torch item (a wheel to install, or the installed build kept) says torch
    is after the run; None when the plan has no torch."""
    item = next((i for i in items if i.name == "torch"), None)
    if item is None:
        return None
    release, _, local = item.version.partition("+")
    return PlannedTorch(release=release, variant=item.variant or local or None)


def _variant_cuda(variant: str | None) -> CudaVersion | None:
    if variant is None or not re.fullmatch(r"cu\d{2,3}", variant):
        return None
    return CudaVersion.parse(variant)


def torch_mismatch(planned: PlannedTorch, landed: TorchIdentity | None) -> str | None:
    """None when ``landed`` is the ``planned`` build (release, variant and, for a CUDA build,
    torch.version.cuda); else what differs, in words."""
    if landed is None:
        return f"the plan installs torch {planned.label}, and no torch is installed after pip ran"
    if landed.release != planned.release:
        return (
            f"torch {landed.label} was installed where the plan is {planned.label} "
            "(another release)"
        )
    if planned.variant is not None and landed.variant != planned.variant:
        kind = "a CPU build" if landed.variant == "cpu" else "another build variant"
        return f"torch {landed.label} was installed where the plan is {planned.label} ({kind})"
    wanted = _variant_cuda(planned.variant)
    if wanted is not None and landed.cuda is not None and landed.cuda != wanted:
        return (
            f"torch {landed.label} says torch.version.cuda is {landed.cuda}, the plan's "
            f"{planned.label} is CUDA {wanted}"
        )
    return None


#: A wheel file pip names in its output: "Processing /wheels/torch-2.13.0+cpu-...whl",
#: "Downloading https://host/.../torch-2.13.0-...whl (1.2 kB)", "Using cached torch-...whl".
_WHEEL_WORD = re.compile(r"(\S*?torch-[^\s/]+?\.whl)")


def torch_supplier(landed: TorchIdentity, pip_lines: Sequence[str]) -> str:
    """Where the installed torch's file came from: pip's own words about the file it took
    (the last line naming a torch wheel of the installed version), else ``direct_url.json``,
    else what its metadata tells."""
    version = landed.pip_version or landed.label
    spellings = (f"torch-{version}-", f"torch-{version.replace('+', '%2B')}-")
    for line in reversed(pip_lines):
        for word in _WHEEL_WORD.findall(line):
            if any(spelling in word for spelling in spellings):
                return printable(f"{word} (pip: {line.strip()[:200]})", one_line=True)
    return printable(landed.describe_source(), one_line=True)
