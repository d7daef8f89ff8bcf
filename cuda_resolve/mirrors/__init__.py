"""Mirror presets and the configuration files they are written to.

``cuda-resolve mirror list | show | set PRESET | test`` is built from these modules:
:mod:`.presets` (the data: ``presets.toml``), :mod:`.targets` (which files a scope means),
:mod:`.pipconf` / :mod:`.condarc` / :mod:`.selfconf` (editing each file while keeping what is
there), :mod:`.apply` (the plan and its diffs), :mod:`.writes` (backups and all-or-nothing
writes), :mod:`.status` (what the files say now) and :mod:`.check` (the live test through the
HTTP layer).
"""

from __future__ import annotations

from .presets import Preset, custom_preset, get_preset, load_presets

__all__ = ["Preset", "custom_preset", "get_preset", "load_presets"]
