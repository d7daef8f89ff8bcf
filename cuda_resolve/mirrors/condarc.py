"""``.condarc`` editing with ruamel.yaml in round-trip mode (comments and key order survive).

What a preset changes, and nothing else:

- ``default_channels``, ``custom_channels``, ``channel_alias``: set to the preset's mirror. Entries
  that point at a *known* mirror (any shipped preset) are removed first, so switching presets
  does not leave the old mirror behind; the user's own entries (a lab server) are kept.
- ``channels``: entries that are URLs of a known mirror or of ``conda.anaconda.org`` become channel
  names (``.../anaconda/cloud/conda-forge/`` -> ``conda-forge``), so ``custom_channels`` decides
  where they come from. When there is no list, none is written: conda's implicit ``defaults``
  applies, now served through the mirror's ``default_channels``. A mirror changes where packages
  come from, never which channels they come from (a written ``[conda-forge]`` would replace
  ``defaults`` and change the packages users get).
- ``ssl_verify: truststore`` (the OS trust store, conda >= 23.9 on Python >= 3.10), unless it
  already names a CA bundle file, which is kept. Never ``false``.
"""

from __future__ import annotations

import io
from collections.abc import Iterable
from typing import Any

from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedMap
from ruamel.yaml.error import YAMLError

from .._frozen import frozen
from ..config import ConfigError
from .presets import CondaMirror, Preset

__all__ = ["CondaSettings", "edit_condarc", "read_conda_settings"]

TRUSTSTORE = "truststore"


@frozen
class CondaSettings:
    channels: tuple[str, ...] = ()
    default_channels: tuple[str, ...] = ()
    custom_channels: tuple[tuple[str, str], ...] = ()
    channel_alias: str | None = None
    #: As written: ``True``/``False``/``"truststore"``/a CA bundle path; None when absent.
    ssl_verify: bool | str | None = None
    proxy_servers: tuple[tuple[str, str], ...] = ()


def _yaml() -> YAML:
    yaml = YAML(typ="rt")
    yaml.indent(mapping=2, sequence=4, offset=2)
    yaml.preserve_quotes = True
    yaml.width = 4096
    return yaml


def _load(text: str, origin: str) -> CommentedMap:
    hint = f"fix {origin} by hand (conda itself would fail on it) and run the command again"
    try:
        data = _yaml().load(text)
    except YAMLError as exc:
        raise ConfigError(
            f"{origin}: not valid YAML: {exc}".replace("\n", " "), hint=hint
        ) from None
    except RecursionError:
        raise ConfigError(
            f"{origin}: not valid YAML: lists or mappings nested too deeply", hint=hint
        ) from None
    except ValueError as exc:  # a number with thousands of digits: int() refuses it
        message = str(exc) if len(str(exc)) <= 120 else str(exc)[:100] + "..."
        raise ConfigError(f"{origin}: not valid YAML: {message}", hint=hint) from None
    if data is None:
        return CommentedMap()
    if not isinstance(data, CommentedMap):
        raise ConfigError(
            f"{origin}: expected a mapping of settings at the top level, found "
            f"{type(data).__name__}",
            hint=f"fix {origin} by hand",
        )
    return data


def _strings(value: Any) -> tuple[str, ...]:
    if isinstance(value, list):
        return tuple(str(item) for item in value)
    if isinstance(value, str):
        return (value,)
    return ()


def _pairs(value: Any) -> tuple[tuple[str, str], ...]:
    if isinstance(value, dict):
        return tuple((str(key), str(item)) for key, item in value.items())
    return ()


def read_conda_settings(text: str, *, origin: str = ".condarc") -> CondaSettings:
    data = _load(text, origin)
    alias = data.get("channel_alias")
    ssl_verify = data.get("ssl_verify", data.get("verify_ssl"))
    return CondaSettings(
        channels=_strings(data.get("channels")),
        default_channels=_strings(data.get("default_channels")),
        custom_channels=_pairs(data.get("custom_channels")),
        channel_alias=None if alias is None else str(alias),
        ssl_verify=ssl_verify if isinstance(ssl_verify, (bool, str)) else None,
        proxy_servers=_pairs(data.get("proxy_servers")),
    )


def _slash(url: str) -> str:
    return url if url.endswith("/") else url + "/"


def _bare(url: str) -> str:
    """The form written into .condarc, as the mirror operators' templates do: no trailing ``/``."""
    return url.rstrip("/")


@frozen
class _Known:
    """URLs that belong to some mirror preset (to recognise and replace them)."""

    channel_bases: tuple[str, ...]  # ".../anaconda/cloud/" and conda.anaconda.org
    default_channels: frozenset[str]
    aliases: frozenset[str]

    @classmethod
    def of(cls, presets: Iterable[Preset], canonical_alias: str) -> _Known:
        bases: list[str] = [canonical_alias]
        defaults: set[str] = set()
        aliases: set[str] = {canonical_alias}
        for preset in presets:
            conda = preset.conda
            if conda is None:
                continue
            bases.extend(url for _, url in conda.custom_channels)
            defaults.update(conda.default_channels)
            if conda.channel_alias:
                aliases.add(conda.channel_alias)
                bases.append(conda.channel_alias)
        return cls(
            channel_bases=tuple(dict.fromkeys(bases)),
            default_channels=frozenset(defaults),
            aliases=frozenset(aliases),
        )

    def channel_name(self, entry: str) -> str | None:
        """``conda-forge`` for ``<known base>/conda-forge[/]``; ``defaults`` for a known default."""
        url = _slash(entry.strip())
        if url in self.default_channels:
            return "defaults"
        for base in self.channel_bases:
            if url.startswith(base):
                rest = url[len(base) :].strip("/")
                if rest and "/" not in rest:
                    return rest
        return None

    def is_mirror_url(self, value: str) -> bool:
        url = _slash(value.strip())
        return url in self.default_channels or url in self.aliases or url in self.channel_bases


def _normalize_channels(data: CommentedMap, known: _Known) -> None:
    channels = data.get("channels")
    if not isinstance(channels, list):
        return  # no list: conda's default (``defaults``) applies and stays
    seen: set[str] = set()
    drop: list[int] = []
    for position, entry in enumerate(channels):
        value = str(entry)
        name = known.channel_name(value) if "://" in value else None
        if name is not None and name != value:
            channels[position] = name
            value = name
        if value in seen:
            drop.append(position)
        seen.add(value)
    for position in reversed(drop):
        del channels[position]


def _set_or_drop(data: CommentedMap, key: str, value: Any) -> None:
    if value is None or value == [] or value == {}:
        if key in data:
            del data[key]
        return
    if data.get(key) != value:
        data[key] = value


def _apply_mirror(data: CommentedMap, conda: CondaMirror | None, known: _Known) -> None:
    # default_channels: ours, or none when the current list is entirely some mirror's
    current_defaults = _strings(data.get("default_channels"))
    if conda is not None and conda.default_channels:
        _set_or_drop(data, "default_channels", [_bare(url) for url in conda.default_channels])
    elif current_defaults and all(known.is_mirror_url(url) for url in current_defaults):
        _set_or_drop(data, "default_channels", None)

    # custom_channels: drop the entries of known mirrors, then add ours
    custom = data.get("custom_channels")
    if not isinstance(custom, dict):
        custom = CommentedMap()
    for name in [name for name, url in custom.items() if known.is_mirror_url(str(url))]:
        del custom[name]
    if conda is not None:
        for name, url in conda.custom_channels:
            if custom.get(name) != _bare(url):
                custom[name] = _bare(url)
    _set_or_drop(data, "custom_channels", custom if custom else None)

    alias = data.get("channel_alias")
    if conda is not None and conda.channel_alias:
        _set_or_drop(data, "channel_alias", _bare(conda.channel_alias))
    elif isinstance(alias, str) and known.is_mirror_url(alias):
        _set_or_drop(data, "channel_alias", None)


def edit_condarc(
    text: str,
    preset: Preset,
    *,
    all_presets: Iterable[Preset],
    origin: str = ".condarc",
) -> tuple[str, tuple[str, ...]]:
    """The new ``.condarc`` text for ``preset`` and notes for the user.

    ``preset.conda is None`` means "upstream channels" (the ``official`` preset): mirror entries
    are removed and nothing replaces them.
    """
    data = _load(text, origin)
    notes: list[str] = []
    known = _Known.of(all_presets, preset.canonical.conda_channel_alias)
    conda = preset.conda
    _apply_mirror(data, conda, known)
    _normalize_channels(data, known)
    if "channels" not in data and conda is not None and conda.default_channels:
        notes.append(
            f"{origin}: no channels list, so conda keeps its default (defaults), now from the "
            "mirror's default_channels; `conda config --add channels conda-forge` would "
            "add conda-forge"
        )

    for legacy in ("verify_ssl",):
        if legacy in data:
            value = data.pop(legacy)
            if (
                "ssl_verify" not in data
                and isinstance(value, str)
                and value.lower() not in ("", "true", "false")
            ):
                data["ssl_verify"] = value  # a CA bundle path: the user's trust setting moves over
            notes.append(f"{origin}: replaced the legacy key {legacy} with ssl_verify")
    current = data.get("ssl_verify")
    if (
        isinstance(current, str)
        and current not in ("", TRUSTSTORE)
        and current.lower() not in ("true", "false")
    ):
        notes.append(
            f"{origin}: ssl_verify names a CA bundle ({current}); kept. `ssl_verify: truststore` "
            "would use the OS trust store instead"
        )
    elif current != TRUSTSTORE:
        if current is False or (isinstance(current, str) and current.lower() == "false"):
            notes.append(f"{origin}: ssl_verify was false (verification off); set to truststore")
        data["ssl_verify"] = TRUSTSTORE
    if conda is not None and conda.note:
        notes.append(f"conda: {conda.note}")

    out = io.StringIO()
    _yaml().dump(data, out)
    return out.getvalue(), tuple(notes)
