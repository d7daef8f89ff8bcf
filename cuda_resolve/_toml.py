"""Path-aware reading of TOML documents (profiles, index files, config).

A :class:`Table` wraps one TOML table with the file it came from and its dotted key path.
Every accessor checks the type and raises the caller's error class with a message that names
the file, the key path and the bad value (``profile.toml: gpu[1].compute_capability = '8.x':
...``). :meth:`Table.finish` rejects keys nobody asked for, so a typo is an error, not a
silently ignored setting.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar, overload

from ._bounded import DEFAULT_READ_LIMIT, read_user_text
from .errors import UsageError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib  # type: ignore[import-not-found, unused-ignore]

__all__ = ["Table", "load_toml_file", "parse_toml_text", "shorten", "shown"]

T = TypeVar("T")
D = TypeVar("D")  # the type of an accessor's default
_MISSING: Any = object()


def parse_toml_text(
    text: str, *, origin: str, error: type[UsageError], hint: str | None = None
) -> Table:
    """Parse *text*; every way it can fail (bad syntax, arrays nested thousands deep, an
    integer with thousands of digits) is one *error* naming *origin*."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise error(f"{origin}: not valid TOML: {exc}", hint=hint) from None
    except RecursionError:
        raise error(
            f"{origin}: not valid TOML: arrays or tables nested too deeply", hint=hint
        ) from None
    except (
        ValueError
    ) as exc:  # int() past Python's digit limit: "Exceeds the limit (4300 digits)..."
        raise error(f"{origin}: not valid TOML: {shorten(str(exc))}", hint=hint) from None
    return Table(data, origin=origin, path="", error=error, hint=hint)


def load_toml_file(
    path: Path, *, error: type[UsageError], hint: str | None = None, limit: int = DEFAULT_READ_LIMIT
) -> Table:
    """Read *path* through the bounded reader (a regular file, at most *limit* bytes, UTF-8) and
    parse it."""
    text = read_user_text(path, error=error, hint=hint, what="a TOML file", limit=limit)
    return parse_toml_text(text, origin=str(path), error=error, hint=hint)


def shorten(text: str, width: int = 120) -> str:
    """*text* cut to *width* characters, so a pathological value cannot fill the screen."""
    return text if len(text) <= width else f"{text[: width - 20]}... ({len(text)} characters)"


def shown(value: object, width: int = 120) -> str:
    """``repr(value)``, shortened: error messages quote values, never megabytes of them."""
    return shorten(_safe_repr(value), width)


def _safe_repr(value: object) -> str:
    try:
        return repr(value)
    except (ValueError, RecursionError):  # an int past the digit limit, a self-nested list
        return f"<{type(value).__name__}>"


class Table:
    """One TOML table being read; remembers which keys were consumed."""

    def __init__(
        self,
        data: dict[str, Any],
        *,
        origin: str,
        path: str,
        error: type[UsageError],
        hint: str | None = None,
    ) -> None:
        self.data = data
        self.origin = origin
        self.path = path
        self.error = error
        self.hint = hint
        self._seen: set[str] = set()

    # -- locating -----------------------------------------------------------------------
    def where(self, key: str | None = None) -> str:
        if key is None:
            return f"{self.origin}: {self.path or '<top level>'}"
        dotted = f"{self.path}.{key}" if self.path else key
        return f"{self.origin}: {dotted}"

    def fail(self, key: str | None, message: str, *, hint: str | None = None) -> UsageError:
        # "file: gpu[0].compute_capability = '8.x': ..." for a bad value, "file: key: ..." otherwise
        separator = " " if message.startswith("= ") else ": "
        return self.error(f"{self.where(key)}{separator}{message}", hint=hint or self.hint)

    def keys(self) -> list[str]:
        return list(self.data)

    def __contains__(self, key: str) -> bool:
        return key in self.data

    # -- typed access -------------------------------------------------------------------
    def _get(self, key: str, default: Any) -> Any:
        self._seen.add(key)
        if key in self.data:
            return self.data[key]
        if default is _MISSING:
            raise self.fail(key, "is required but missing")
        return default

    def _typed(self, key: str, kind: type | tuple[type, ...], label: str, default: Any) -> Any:
        value = self._get(key, default)
        if value is default and key not in self.data:
            return value
        if isinstance(value, bool) and bool not in (kind if isinstance(kind, tuple) else (kind,)):
            raise self.fail(key, f"= {shown(value)}: expected {label}")
        if not isinstance(value, kind):
            raise self.fail(key, f"= {shown(value)}: expected {label}")
        return value

    # Each accessor returns the checked type, or the caller's default (whose type the overloads
    # carry): ``string("notes", "")`` is a ``str``, ``string("cuda", None)`` a ``str | None``.
    @overload
    def string(self, key: str) -> str: ...
    @overload
    def string(self, key: str, default: None) -> str | None: ...
    @overload
    def string(self, key: str, default: D) -> str | D: ...
    def string(self, key: str, default: Any = _MISSING) -> Any:
        return self._typed(key, str, "a string", default)

    @overload
    def boolean(self, key: str) -> bool: ...
    @overload
    def boolean(self, key: str, default: None) -> bool | None: ...
    @overload
    def boolean(self, key: str, default: D) -> bool | D: ...
    def boolean(self, key: str, default: Any = _MISSING) -> Any:
        return self._typed(key, bool, "true or false", default)

    @overload
    def integer(self, key: str) -> int: ...
    @overload
    def integer(self, key: str, default: None) -> int | None: ...
    @overload
    def integer(self, key: str, default: D) -> int | D: ...
    def integer(self, key: str, default: Any = _MISSING) -> Any:
        return self._typed(key, int, "an integer", default)

    @overload
    def strings(self, key: str) -> tuple[str, ...]: ...
    @overload
    def strings(self, key: str, default: None) -> tuple[str, ...] | None: ...
    @overload
    def strings(self, key: str, default: D) -> tuple[str, ...] | D: ...
    def strings(self, key: str, default: Any = _MISSING) -> Any:
        value = self._typed(key, list, "a list of strings", default)
        if value is default and key not in self.data:
            return value
        for position, item in enumerate(value):
            if not isinstance(item, str):
                raise self.fail(f"{key}[{position}]", f"= {shown(item)}: expected a string")
        return tuple(value)

    @overload
    def parsed(self, key: str, parser: Callable[[str], T]) -> T: ...
    @overload
    def parsed(self, key: str, parser: Callable[[str], T], default: D) -> T | D: ...
    def parsed(self, key: str, parser: Callable[[str], T], default: Any = _MISSING) -> Any:
        """Read a string and convert it; the parser's ValueError becomes a path-aware error."""
        value = self.string(key, default)
        if value is default and key not in self.data:
            return value
        try:
            return parser(value)
        except ValueError as exc:
            raise self.fail(key, f"= {shown(value)}: {shorten(str(exc))}") from None

    def table(self, key: str, *, required: bool = False) -> Table | None:
        value = self._get(key, _MISSING if required else None)
        if value is None:
            return None
        if not isinstance(value, dict):
            raise self.fail(key, f"= {shown(value)}: expected a table")
        return self._child(value, key)

    def tables(self, key: str) -> Iterator[Table]:
        """Each entry of an array of tables (``[[gpu]]``), with ``key[i]`` paths."""
        value = self._get(key, [])
        if isinstance(value, dict):
            value = [value]
        if not isinstance(value, list):
            raise self.fail(key, f"= {shown(value)}: expected an array of tables ([[{key}]])")
        for position, item in enumerate(value):
            if not isinstance(item, dict):
                raise self.fail(f"{key}[{position}]", f"= {shown(item)}: expected a table")
            yield self._child(item, f"{key}[{position}]")

    def sub_tables(self) -> Iterator[tuple[str, Table]]:
        """Every remaining key whose value is a table, as (name, Table)."""
        for key in list(self.data):
            if isinstance(self.data[key], dict):
                self._seen.add(key)
                yield key, self._child(self.data[key], key)

    def _child(self, data: dict[str, Any], key: str) -> Table:
        path = f"{self.path}.{key}" if self.path else key
        return Table(data, origin=self.origin, path=path, error=self.error, hint=self.hint)

    def finish(
        self,
        *,
        allowed_extra: tuple[str, ...] = (),
        newer: Callable[[], str] | None = None,
    ) -> None:
        """Reject keys that were not read: unknown keys are an error naming the key. ``newer``:
        what to do where a newer writer may have added the key (said after the known keys;
        called only then)."""
        unknown = [key for key in self.data if key not in self._seen and key not in allowed_extra]
        if unknown:
            known = sorted(self._seen | set(allowed_extra))
            hint = f"known keys here: {', '.join(known) or '(none)'}"
            if newer is not None:
                hint = f"{hint}; {newer()}"
            raise self.fail(unknown[0], "unknown key", hint=hint)
