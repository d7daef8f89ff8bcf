"""Regular expressions compiled when first used.

Compiling one costs 0.1 to 0.5 ms, and a module's patterns are mostly not used by the command that
imported it: ``doctor --json`` imports about twenty it never applies (issue 28). A pattern made
here is compiled by ``re`` the first time one of its methods is looked up, once.
"""

from __future__ import annotations

import re

TYPE_CHECKING = False  # typing's, without importing typing (issue 28)
if TYPE_CHECKING:
    from typing import Any, cast
else:

    def cast(_type: object, value: object) -> object:  # typing.cast: the value itself
        return value


__all__ = ["lazy_compile"]


class _LazyPattern:
    """Stands in for ``re.compile(pattern, flags)``: every attribute comes from the compiled
    pattern, made on the first lookup."""

    __slots__ = ("_compiled", "_flags", "_pattern")

    def __init__(self, pattern: str, flags: int) -> None:
        self._pattern = pattern
        self._flags = flags
        self._compiled: re.Pattern[str] | None = None

    def __getattr__(self, name: str) -> Any:
        compiled = self._compiled
        if compiled is None:
            compiled = self._compiled = re.compile(self._pattern, self._flags)
        return getattr(compiled, name)

    def __repr__(self) -> str:
        return f"lazy_compile({self._pattern!r}, {self._flags!r})"


def lazy_compile(pattern: str, flags: int = 0) -> re.Pattern[str]:
    """``re.compile(pattern, flags)``, done when the pattern is first used. Only its methods and
    attributes may be used (``pattern.sub(...)``), not the pattern itself given to ``re``'s
    functions (``re.sub(pattern, ...)``)."""
    return cast("re.Pattern[str]", _LazyPattern(pattern, flags))
