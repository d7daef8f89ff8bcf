"""The Plan: what to install, from where, and what to build — derived from a Resolution.

A plan names exact artifacts and builds and downloads nothing. :func:`make_plan` turns a
Resolution into the decision (``install`` items of kind ``wheel`` / ``build`` / ``installed``);
:func:`cuda_resolve.install.prepare.complete_plan` then decides everything the executor needs
(every build's :class:`~cuda_resolve.build.spec.BuildSpec` and wheel key, every pip step with its
exact words, the trust options, the imports to check), so the executor decides nothing new and a
plan written here can be applied elsewhere. Its JSON form is a stable, versioned interface
(``docs/plan-format.md``): keys are only added; :meth:`Plan.from_json` reads it back.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal

from ._frozen import frozen
from .build.spec import BuildSpec, spec_from_json
from .compat import format_arch_list
from .environment import Environment
from .errors import UsageError
from .index.urls import expand_pattern
from .profile import environment_from_dict, environment_to_dict
from .wheelhouse.errors import WheelhouseError
from .wheelhouse.key import WheelKey

if TYPE_CHECKING:  # the resolver is imported only where a plan is resolved (not for a lock's sync)
    from ._toml import Table
    from .resolve import Alternative, Candidate, Rejection, Resolution

__all__ = [
    "PLAN_FORMAT",
    "PYPI_SIMPLE",
    "PipStep",
    "Plan",
    "PlanFormatError",
    "PlanItem",
    "PlannedBuild",
    "make_plan",
]

PYPI_SIMPLE = "https://pypi.org/simple"

#: The version of the plan document. 1: the decision only (PR before the complete plan); 2: the
#: complete plan (builds, steps, trust options). Keys are only added; a reader refuses a newer one.
PLAN_FORMAT = 2


class PlanFormatError(UsageError):
    """A plan file that cannot be read or applied; the message names the key path."""


@frozen
class PlanItem:
    """One package of a plan: what is kept, downloaded or built, and why."""

    name: str
    version: str
    kind: Literal["wheel", "build", "installed"]
    variant: str | None = None
    requirement: str | None = None  # what pip is given: "torch==2.5.1+cu124"
    url: str | None = None  # the exact artifact, where the index knows its name
    index: str | None = None  # the index pip reads it from
    find_links: str | None = None
    recipe: str | None = None
    repository: str | None = None
    revision: str | None = None
    arch_list: str | None = None
    toolkit: str | None = None
    toolkit_root: str | None = None
    torch: str | None = None  # extensions: the torch build they belong to
    sha256: str | None = None  # the file's hash, read from its index when the plan is applied

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "name": self.name,
            "version": self.version,
            "variant": self.variant,
            "kind": self.kind,
        }
        for key in (
            "requirement",
            "url",
            "sha256",
            "index",
            "find_links",
            "recipe",
            "repository",
            "revision",
            "arch_list",
            "toolkit",
            "toolkit_root",
            "torch",
        ):
            value = getattr(self, key)
            if value is not None:
                data[key] = value
        if self.kind == "wheel":
            # Always present for wheels: null where only the index can name the file (PyPI's
            # and PyTorch's file names and hashes are read at fetch or lock time, not by plan).
            data.setdefault("url", None)
        return data

    @classmethod
    def from_table(cls, table: Table) -> PlanItem:
        from ._plan_checks import check_item_table

        check_item_table(table)
        kind = table.string("kind")
        if kind not in ("wheel", "build", "installed"):
            raise table.fail("kind", f"= {kind!r}: expected wheel, build or installed")
        item = cls(
            name=table.string("name"),
            version=table.string("version"),
            kind=kind,  # type: ignore[arg-type]
            **{
                key: table.string(key, None)
                for key in (
                    "variant",
                    "requirement",
                    "url",
                    "sha256",
                    "index",
                    "find_links",
                    "recipe",
                    "repository",
                    "revision",
                    "arch_list",
                    "toolkit",
                    "toolkit_root",
                    "torch",
                )
            },
        )
        table.finish(allowed_extra=("hashes",))
        return item


@frozen
class PipStep:
    """One ``python -m pip install`` run, decided at planning: its words, the built wheels it
    installs (by wheel key, not path: the wheelhouse names the file when the plan is applied),
    the indexes that must answer before anything is downloaded, and whether it asks the PyTorch
    index alone (``PIP_FIND_LINKS``, ``PIP_EXTRA_INDEX_URL`` and the like neutralised) or, with
    ``pypi_index``, the user's own index (PyPI or its mirror) alone: the steps installing torch."""

    purpose: str
    args: tuple[str, ...]
    built: tuple[str, ...] = ()  # wheel key digests, appended as wheelhouse paths
    checked_urls: tuple[str, ...] = ()
    torch_index_only: bool = False
    pypi_index: bool = False  # with torch_index_only: the user's index (PyPI, a mirror) is kept

    def to_json(self) -> dict[str, Any]:
        return {
            "purpose": self.purpose,
            "args": list(self.args),
            "built": list(self.built),
            "checked_urls": list(self.checked_urls),
            "torch_index_only": self.torch_index_only,
            "pypi_index": self.pypi_index,
        }

    @classmethod
    def from_table(cls, table: Table) -> PipStep:
        from ._plan_checks import check_pip_words

        check_pip_words(table, "args", table.strings("args"))
        step = cls(
            purpose=table.string("purpose"),
            args=table.strings("args"),
            built=table.strings("built", ()),
            checked_urls=table.strings("checked_urls", ()),
            torch_index_only=table.boolean("torch_index_only", False),
            pypi_index=table.boolean("pypi_index", False),
        )
        table.finish()
        return step


@frozen
class PlannedBuild:
    """One source build of the plan: its spec, the wheel key it is published (or was found)
    under, where its source comes from, and, where the wheelhouse already holds a wheel that
    covers every GPU, that wheel and why it is reused."""

    spec: BuildSpec
    key: WheelKey
    source: str  # in words: "git clone URL at REV", "archive URL (sha256 ...)", "--source DIR"
    reused: str | None = None  # why the wheelhouse's wheel for ``key`` is used instead of building

    def to_json(self) -> dict[str, Any]:
        data = self.spec.to_json()
        data["wheel_key"] = self.key.to_json()
        data["wheel_digest"] = self.key.digest
        data["wheel_version"] = self.key.labelled_version
        data["source"] = self.source
        data["reused"] = self.reused
        return data

    @classmethod
    def from_table(cls, table: Table) -> PlannedBuild:
        from ._plan_checks import check_build_table

        check_build_table(table)
        key_table = table.table("wheel_key", required=True)
        assert key_table is not None
        try:
            key = WheelKey.from_json(key_table.data, origin=key_table.where())
        except WheelhouseError as exc:  # bad input in a plan: exit 2, as any other field
            raise PlanFormatError(exc.message, hint=exc.hint) from None
        source = table.string("source")
        reused = table.string("reused", None)
        # Written for the reader: what the key says, never another wheel's.
        for extra, derived in (
            ("wheel_digest", key.digest),
            ("wheel_version", key.labelled_version),
        ):
            written = table.string(extra, None)
            if written is not None and written != derived:
                raise table.fail(extra, f"= {written!r}: the wheel key's is {derived!r}")
        return cls(spec=spec_from_json(table), key=key, source=source, reused=reused)


@frozen
class Plan:
    """The whole decision for one request on one machine, with the steps that carry it out."""

    environment: Environment
    items: tuple[PlanItem, ...]
    pass_through: tuple[str, ...]
    reasons: tuple[str, ...]
    rejected: tuple[Rejection, ...]
    alternatives: tuple[Alternative, ...] = ()  # builds that also fit, and why they lost
    # -- what complete_plan decides (empty until then) ---------------------------------------
    complete: bool = False
    builds: tuple[PlannedBuild, ...] = ()
    steps: tuple[PipStep, ...] = ()
    imports: tuple[str, ...] = ()  # modules imported after installing
    smoke: tuple[tuple[str, str], ...] = ()  # (package, script) for --smoke
    notes: tuple[str, ...] = ()
    pip_version: str | None = None  # the target's pip at planning; None: another machine's plan
    trust: tuple[str, ...] | None = None  # pip's trust-store options; None: decided when applied
    trust_note: str | None = None
    skip_pip: str | None = None  # why pip need not run at all (everything is installed as planned)

    def to_json(self, *, explain: bool = False) -> dict[str, Any]:
        data: dict[str, Any] = {
            "format": PLAN_FORMAT,
            "environment": environment_to_dict(self.environment),
            "install": [item.to_json() for item in self.items],
            "pass_through": list(self.pass_through),
            "reasons": list(self.reasons),
        }
        if self.complete:
            data.update(
                {
                    "builds": [build.to_json() for build in self.builds],
                    "steps": [step.to_json() for step in self.steps],
                    "imports": list(self.imports),
                    "smoke": [
                        {"package": package, "script": script} for package, script in self.smoke
                    ],
                    "notes": list(self.notes),
                    "pip_version": self.pip_version,
                    "trust": "decided when applied" if self.trust is None else list(self.trust),
                    "trust_note": self.trust_note,
                    "skip_pip": self.skip_pip,
                }
            )
        if explain:
            data["rejected"] = [
                {
                    "name": r.name,
                    "candidate": r.label,
                    "category": r.category,
                    "kind": r.kind,
                    "reason": r.reason,
                }
                for r in self.rejected
            ]
            data["alternatives"] = [
                {"name": a.name, "candidate": a.label, "reason": a.reason}
                for a in self.alternatives
            ]
        return data

    @classmethod
    def from_json(cls, data: object, *, origin: str = "<plan>") -> Plan:
        """The plan :meth:`to_json` wrote (format 2, complete): errors name ``origin`` and the
        key."""
        from ._plan_checks import check_plan, check_trust, plain_data
        from ._toml import Table
        from ._upgrade import upgrade_hint

        replan = f"cuda-resolve plan {_requests_of(data)} --json > {new_plan_file(origin)}"
        hint = f"write the plan with `{replan}` (this version of cuda-resolve), then apply it"
        if not isinstance(data, dict):
            raise PlanFormatError(f"{origin}: not a plan (expected a JSON object)", hint=hint)
        if "format" not in data and isinstance(data.get("error"), str):
            # What `plan --json > plan.json` writes when planning failed: its error, not a plan
            # of an older format (which "format = 1" would wrongly suggest).
            error_hint = data.get("hint")
            raise PlanFormatError(
                f"{origin}: holds the error of a `cuda-resolve plan` that failed, not a plan: "
                f"{data['error']}",
                hint=error_hint if isinstance(error_hint, str) and error_hint else hint,
            )
        plain = plain_data(data, origin=origin, error=PlanFormatError, hint=hint)
        table = Table(plain, origin=origin, path="", error=PlanFormatError, hint=hint)
        version = table.integer("format", 1)
        if version != PLAN_FORMAT:
            newer = version > PLAN_FORMAT
            raise table.fail(
                "format",
                f"= {version}: this cuda-resolve applies plan format {PLAN_FORMAT}",
                hint=f"{upgrade_hint()}, or make the plan with this one: {replan}"
                if newer
                else hint,
            )
        if "builds" not in table or "steps" not in table:
            raise table.fail(
                None, "is a decision only (no builds or steps): it cannot be applied", hint=hint
            )
        environment_table = table.table("environment", required=True)
        assert environment_table is not None
        environment = environment_from_dict(
            environment_table.data, origin=environment_table.where()
        )
        items = tuple(PlanItem.from_table(t) for t in table.tables("install"))
        trust_value = table.data.get("trust")
        table.data.pop("trust", None)
        if trust_value == "decided when applied" or trust_value is None:
            trust: tuple[str, ...] | None = None
        elif isinstance(trust_value, list) and all(isinstance(word, str) for word in trust_value):
            trust = tuple(trust_value)
            check_trust(table, trust)
        else:
            raise table.fail(
                "trust",
                f"= {trust_value!r}: expected a list of pip options or 'decided when applied'",
            )
        smoke: list[tuple[str, str]] = []
        for smoke_table in table.tables("smoke"):
            smoke.append((smoke_table.string("package"), smoke_table.string("script")))
            smoke_table.finish()
        plan = cls(
            environment=environment,
            items=items,
            pass_through=table.strings("pass_through", ()),
            reasons=table.strings("reasons", ()),
            rejected=(),
            complete=True,
            builds=tuple(PlannedBuild.from_table(t) for t in table.tables("builds")),
            steps=tuple(PipStep.from_table(t) for t in table.tables("steps")),
            imports=table.strings("imports", ()),
            smoke=tuple(smoke),
            notes=table.strings("notes", ()),
            pip_version=table.string("pip_version", None),
            trust=trust,
            trust_note=table.string("trust_note", None),
            skip_pip=table.string("skip_pip", None),
        )
        table.finish(
            allowed_extra=("rejected", "alternatives", "command", "trust"),
            newer=lambda: (
                "a plan from a newer cuda-resolve may hold keys this one does not know: "
                f"{upgrade_hint()}, or make the plan with this one: {replan}"
            ),
        )
        check_plan(plan, table)
        return plan

    def requests(self) -> list[str]:
        """What the plan installs, as requirements a new command can ask for again: its items
        (those not kept as installed) by name, then what it passes through to pip."""
        named = [item.name for item in self.items if item.kind != "installed"]
        return [*named, *self.pass_through]

    def explain_lines(self, *, per_group: int = 3) -> list[str]:
        """The rejections, grouped: one line per family of alike reasons, newest first."""
        groups: dict[tuple[str, str], list[Rejection]] = {}
        for rejection in reversed(self.rejected):
            groups.setdefault((rejection.name, rejection.kind), []).append(rejection)
        lines: list[str] = []
        for members in groups.values():
            shown = 1 if members[0].category in ("python", "cpu", "platform") else per_group
            lines.extend(member.reason for member in members[:shown])
            if len(members) > shown:
                lines.append(
                    f"  ... and {len(members) - shown} more {members[0].name} option(s) "
                    "ruled out alike"
                )
        return lines


def _on_pypi(candidate: Candidate, env: Environment) -> bool:
    release, variant = candidate.release, candidate.torch_variant
    if release is None or variant is None or env.machine.os != "linux":
        return False
    if env.machine.arch == "aarch64":
        return variant.name == release.pypi_linux_aarch64
    return env.machine.arch == "x86_64" and variant.pypi_default


def _with_extras(name: str, extras: tuple[str, ...]) -> str:
    return f"{name}[{','.join(extras)}]" if extras else name


def _torch_family_item(
    candidate: Candidate, torch: Candidate | None, env: Environment, extras: tuple[str, ...] = ()
) -> PlanItem:
    if candidate.kind == "installed":
        return PlanItem(
            name=candidate.name,
            version=str(candidate.version),
            kind="installed",
            variant=candidate.variant,
        )
    source = candidate if candidate.name == "torch" else torch
    on_pypi = source is not None and _on_pypi(source, env)
    variant = candidate.variant
    index = (
        PYPI_SIMPLE
        if on_pypi
        else (source.torch_variant.index_url if source and source.torch_variant else None)
    )
    local = "" if on_pypi or not variant else f"+{variant}"
    return PlanItem(
        name=candidate.name,
        version=str(candidate.version),
        kind="wheel",
        variant=variant,
        requirement=f"{_with_extras(candidate.name, extras)}=={candidate.version}{local}",
        index=index,
    )


def _extension_item(
    candidate: Candidate, torch: Candidate | None, env: Environment, extras: tuple[str, ...] = ()
) -> PlanItem:
    torch_label = f"{torch.version}" if torch else None
    name = candidate.package.name if candidate.package else candidate.name
    if candidate.kind == "installed":
        # A build installed earlier that fits (resolve.installed): kept as it is, nothing fetched.
        return PlanItem(
            name=name,
            version=str(candidate.version),
            kind="installed",
            variant=candidate.variant,
            arch_list=format_arch_list(candidate.arch_list) or None,
            torch=f"{candidate.torch_version}+{candidate.variant}"
            if candidate.torch_version is not None
            else torch_label,
        )
    if candidate.kind == "build":
        toolkit = candidate.toolkit
        recipe = candidate.recipe
        return PlanItem(
            name=name,
            version=str(candidate.version),
            kind="build",
            variant=torch.variant if torch else None,
            recipe=recipe.name if recipe else None,
            repository=recipe.repository if recipe else None,
            revision=recipe.revision if recipe else None,
            arch_list=format_arch_list(candidate.arch_list),
            toolkit=str(toolkit.version) if toolkit else None,
            toolkit_root=toolkit.root if toolkit else None,
            torch=torch_label,
        )
    package = candidate.package
    variant = candidate.variant or ""
    wheel_platforms = candidate.wheels.platforms if candidate.wheels else ()
    platform = next((p for p in env.platform_tags() if p in wheel_platforms), None)

    def expand(pattern: str | None) -> str | None:
        if pattern is None or candidate.torch_version is None:
            return None
        return expand_pattern(
            pattern,
            torch=str(candidate.torch_version),
            variant=variant,
            python=env.python.short_version,
            version=str(candidate.version),
            platform=platform,
        )

    return PlanItem(
        name=name,
        version=str(candidate.version),
        kind="wheel",
        variant=variant or None,
        requirement=f"{_with_extras(name, extras)}=={candidate.version}",
        url=expand(package.wheel_url if package else None),
        find_links=expand(package.find_links if package else None),
        torch=f"{candidate.torch_version}+{variant}",
    )


def make_plan(resolution: Resolution, env: Environment) -> Plan:
    torch = resolution.get("torch")
    items: list[PlanItem] = []
    for candidate in resolution.chosen:
        if candidate.name in ("torch", "torchvision", "torchaudio"):
            items.append(
                _torch_family_item(candidate, torch, env, resolution.extras_of(candidate.name))
            )
        else:
            items.append(
                _extension_item(candidate, torch, env, resolution.extras_of(candidate.name))
            )
    return Plan(
        environment=env,
        items=tuple(items),
        pass_through=resolution.pass_through,
        reasons=resolution.reasons,
        rejected=tuple(dict.fromkeys(resolution.rejected)),
        alternatives=resolution.alternatives,
    )


#: The file a hint writes a plan made again into: never the plan file that was refused.
NEW_PLAN = "plan.here.json"


def new_plan_file(refused: str) -> str:
    """Where a hint writes the plan made again instead of *refused* (a colleague's, maybe),
    shell-quoted."""
    import shlex
    from pathlib import Path

    return shlex.quote(NEW_PLAN if Path(refused).name != NEW_PLAN else f"again.{NEW_PLAN}")


def _requests_of(data: object) -> str:
    """The requirements of the ``cuda-pip install ...`` command a plan file names (``REQ...``
    where it names none), for the command that makes it again."""
    import shlex

    command = data.get("command") if isinstance(data, dict) else None
    if not (isinstance(command, list) and all(isinstance(word, str) for word in command)):
        return "REQ..."
    if command[:2] != ["cuda-pip", "install"]:
        return "REQ..."
    requests: list[str] = []
    for word in command[2:]:
        if word.startswith("-"):
            break
        requests.append(word)
    return shlex.join(requests) if requests else "REQ..."
