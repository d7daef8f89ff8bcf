"""The result type of every doctor check."""

from __future__ import annotations

from .._frozen import frozen

TYPE_CHECKING = False  # typing's, without importing typing (issue 28)
if TYPE_CHECKING:
    from typing import Literal

    Status = Literal["ok", "info", "warn", "error"]

__all__ = ["Finding", "worst"]

_RANK: dict[str, int] = {"ok": 0, "info": 1, "warn": 2, "error": 3}


@frozen
class Finding:
    """One doctor check's result: what it saw, how bad it is and the fix."""

    check: str  # stable id, e.g. "driver-supports-torch"
    status: Status
    title: str  # what was checked, in a few words
    found: str  # what was found, with the values
    fix: str | None = None  # what to do; None when nothing needs doing

    def to_json(self) -> dict[str, str | None]:
        return {
            "check": self.check,
            "status": self.status,
            "title": self.title,
            "found": self.found,
            "fix": self.fix,
        }


def worst(findings: list[Finding]) -> Status:
    """The most severe status among findings ("ok" when there are none)."""
    status: Status = "ok"
    for finding in findings:
        if _RANK[finding.status] > _RANK[status]:
            status = finding.status
    return status
