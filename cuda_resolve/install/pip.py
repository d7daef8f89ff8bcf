"""Driving the target's own pip through its command line (never through pip's internal modules).

pip >= 22 is required. From 24.2 pip uses the system trust store itself; 22.2 - 24.1 get
``--use-feature=truststore`` where the target can import truststore; anything older is refused
with the upgrade command.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass

from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from .._bounded import run
from ..errors import InstallError

__all__ = ["PipFacts", "installed_distributions", "pip_facts_and_distributions", "trust_options"]

# One interpreter start answers everything cuda-pip asks of the target: each start of a big
# environment costs a few 100 ms.
_PROBE_SCRIPT = """
import json
from importlib import metadata
try:
    pip_version = metadata.version("pip")
except Exception:
    pip_version = None
try:
    import truststore  # noqa: F401
    has_truststore = True
except Exception:
    has_truststore = False
seen = {}
for dist in metadata.distributions():
    name = dist.metadata["Name"]
    if name and name.lower() not in seen:
        seen[name.lower()] = [name, dist.version]
print(json.dumps({"pip": pip_version, "truststore": has_truststore, "distributions": sorted(seen.values())}))
"""

MINIMUM_PIP = Version("22")


@dataclass(frozen=True, kw_only=True, slots=True)
class PipFacts:
    version: Version
    truststore: bool


def _run_json(python: str, script: str, environ: Mapping[str, str], what: str) -> object:
    done = run([python, "-c", script], timeout=60, env=environ)
    if done is not None and done.ok:
        try:
            return json.loads(done.stdout)
        except ValueError:
            pass
    raise InstallError(f"{python} could not report {what}", hint="check that the target interpreter runs (pass --python PATH)")


def _probe(python: str, environ: Mapping[str, str]) -> dict[str, object]:
    data = _run_json(python, _PROBE_SCRIPT, environ, "its pip version and installed packages")
    if not isinstance(data, dict):
        raise InstallError(f"{python} gave an unreadable answer about its packages", hint="check that the target interpreter runs")
    return data


def pip_facts_and_distributions(python: str, environ: Mapping[str, str]) -> tuple[PipFacts, dict[str, str]]:
    data = _probe(python, environ)
    return _parse_facts(python, data), _distributions(data.get("distributions"))


def _parse_facts(python: str, data: object) -> PipFacts:
    if not isinstance(data, dict):
        raise InstallError(f"{python} could not report its pip version", hint="check that the target interpreter runs")
    text = data.get("pip")
    if not isinstance(text, str):
        raise InstallError(f"{python} has no pip", hint=f"{python} -m ensurepip --upgrade")
    try:
        version = Version(text)
    except InvalidVersion:
        raise InstallError(f"{python}: pip reports version {text!r}", hint=f"{python} -m pip install -U pip") from None
    if version < MINIMUM_PIP:
        raise InstallError(f"{python} has pip {version}; cuda-pip needs pip >= {MINIMUM_PIP}",
                           hint=f"{python} -m pip install -U pip")
    return PipFacts(version=version, truststore=bool(data.get("truststore")))


def trust_options(facts: PipFacts) -> tuple[list[str], str | None]:
    """pip options that make it use the system trust store, and a note when it cannot."""
    if facts.version >= Version("24.2"):
        return [], None
    if facts.version >= Version("22.2") and facts.truststore:
        return ["--use-feature=truststore"], None
    return [], (
        f"pip {facts.version} verifies TLS with its own CA bundle, not the system trust store: behind a "
        "TLS-intercepting proxy upgrade it (python -m pip install -U pip) or set PIP_CERT"
    )


def installed_distributions(python: str, environ: Mapping[str, str]) -> dict[str, str]:
    """``{canonical name: version}`` of every distribution the target sees."""
    return _distributions(_probe(python, environ).get("distributions"))


def _distributions(data: object) -> dict[str, str]:
    result: dict[str, str] = {}
    if isinstance(data, list):
        for entry in data:
            if isinstance(entry, list) and len(entry) == 2:
                result[canonicalize_name(str(entry[0]))] = str(entry[1])
    return result

