"""A damaged wheelhouse entry is named with a fix that works (issue 29). ``wheelhouse list`` said
"note: .../entry.json: size = 'big': expected a byte count", then "no wheels yet", and the
entry's own hint, ``wheelhouse prune --package NAME``, removes nothing (prune sees no wheel of
that package: the damaged entry is not one). Now each unusable entry's note ends with the command
that removes it, which, pasted, leaves a clean wheelhouse; with no usable wheel the summary says
how many entries are unusable."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

from test_wheelhouse import make_key, make_wheel

from cuda_resolve.wheelhouse.store import Wheelhouse


def _list(house: Path) -> str:
    environ = {**os.environ, "CUDA_RESOLVE_WHEELHOUSE": str(house)}
    done = subprocess.run(
        [str(Path(sys.executable).parent / "cuda-resolve"), "wheelhouse", "list"],
        env=environ, capture_output=True, text=True, timeout=60, check=True,
    )  # fmt: skip
    return done.stdout + done.stderr


def test_a_damaged_entry_is_named_with_the_command_that_removes_it(tmp_path: Path) -> None:
    house = Wheelhouse(tmp_path / "house")
    stored = house.publish(make_key(), make_wheel(tmp_path / "built"), strip_debug=False)
    entry = stored.path.parent / "entry.json"
    data = json.loads(entry.read_text())
    entry.write_text(json.dumps({**data, "size": "big"}))
    said = _list(house.root)
    assert "size = 'big'" in said and "no usable wheel: 1 entry above is not" in said, said
    fix = re.search(r"remove it: (rm -r \S+)", said)
    assert fix, said
    subprocess.run(["bash", "-c", fix.group(1)], check=True, timeout=30)
    after = _list(house.root)
    assert "note:" not in after and "no wheels yet" in after, after
