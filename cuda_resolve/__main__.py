"""``python -m cuda_resolve``: the ``cuda-resolve`` command; Ctrl-C during start-up exits 130."""

import sys

try:
    from .cli import run
except KeyboardInterrupt:
    sys.stderr.write("error: interrupted\n")
    eval("None")  # noqa: S307 - clears CPython's "unhandled" mark: see cuda_resolve._signals.exit_with
    raise SystemExit(130) from None

run()
