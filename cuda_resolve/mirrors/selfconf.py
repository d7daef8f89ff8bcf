"""cuda-resolve's own config file as ``mirror set`` rewrites it.

``preset``, ``[pytorch]`` and the ``[[rewrite]]`` rules of the ecosystems the preset covers
(PyPI, PyTorch, kaolin, conda channels) are replaced; ``index_dirs``, ``[proxy]``, the rules of
ecosystems a custom preset leaves alone, and rules for other prefixes (a lab's artifact store)
are kept. The text is checked with the reader :func:`cuda_resolve.config.load_config` uses,
before (a broken file is reported, not overwritten) and after.
"""

from __future__ import annotations

import copy
from typing import Any

import tomli_w

from .._toml import parse_toml_text
from ..config import ConfigError, parse_config
from .presets import Preset

__all__ = ["HEADER", "edit_own_config"]

HEADER = (
    "# cuda-resolve configuration (docs/mirrors.md).\n"
    "# `cuda-resolve mirror set` rewrites `preset`, [pytorch] and the [[rewrite]] rules of the\n"
    "# ecosystems it sets; index_dirs, [proxy] and other rules are kept. Comments are not.\n"
)


def edit_own_config(text: str | None, preset: Preset, *, origin: str) -> str:
    """The new config text: ``text`` (None = no file yet) with ``preset`` applied."""
    data: dict[str, Any] = {}
    if text is not None:
        parse_config(text, origin=origin)
        data = copy.deepcopy(parse_toml_text(text, origin=origin, error=ConfigError).data)
    canonical = preset.canonical

    def replaced(rule: dict[str, Any]) -> bool:
        ecosystem = canonical.ecosystem_of(str(rule.get("canonical", "")))
        return ecosystem is not None and preset.covers(ecosystem)

    new_rules = [
        {"canonical": rule.canonical, "mirror": rule.mirror, "artifacts_only": rule.artifacts_only}
        for rule in preset.rewrites()
    ]
    rules = new_rules + [rule for rule in data.pop("rewrite", []) if not replaced(rule)]

    data["preset"] = preset.name
    if preset.covers("pytorch"):
        torch = preset.torch_index()
        if torch is not None:
            data["pytorch"] = {"layout": torch.layout, "url": torch.url}
        else:
            data.pop("pytorch", None)

    ordered: dict[str, Any] = {}
    for key in ("preset", "index_dirs"):
        if key in data:
            ordered[key] = data.pop(key)
    ordered.update(data)
    if rules:
        ordered["rewrite"] = rules
    result = HEADER + "\n" + tomli_w.dumps(ordered)
    try:
        parse_config(result, origin=origin)
    except ConfigError as exc:  # pragma: no cover - would be a bug in this module
        raise ConfigError(f"{origin}: the rewritten config does not read back: {exc}") from None
    return result
