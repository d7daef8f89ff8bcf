"""Mirror presets: the data in ``presets.toml``, parsed once into frozen dataclasses.

A :class:`Preset` says, per ecosystem (PyPI, the PyTorch wheel index, conda channels, kaolin's
pages), where a mirror lives and how it is laid out, with the ``source`` that documents it. From
a preset follow the three things ``mirror set`` writes: pip's ``index-url``, the ``.condarc``
channel settings, and cuda-resolve's own URL-prefix rewrites (:meth:`Preset.rewrites`).
"""

from __future__ import annotations

from functools import cache
from importlib import resources
from typing import Literal

from .._frozen import frozen
from .._toml import Table, parse_toml_text
from ..config import ConfigError, Rewrite, TorchIndex, parse_mirror_url
from ..errors import IndexDataError, UsageError
from ..redaction import redact

__all__ = [
    "ECOSYSTEMS",
    "Canonical",
    "CondaMirror",
    "Ecosystem",
    "OnMiss",
    "Preset",
    "PypiMirror",
    "PytorchMirror",
    "custom_preset",
    "get_preset",
    "load_presets",
    "parse_presets",
]

OnMiss = Literal["no", "upstream", "another-mirror", "unknown"]
Ecosystem = Literal["pypi", "pytorch", "conda", "kaolin"]
ECOSYSTEMS: tuple[Ecosystem, ...] = ("pypi", "pytorch", "conda", "kaolin")
PytorchLayout = Literal["simple", "flat", "none"]
_ON_MISS: tuple[OnMiss, ...] = ("no", "upstream", "another-mirror", "unknown")
_PYTORCH_LAYOUTS: tuple[PytorchLayout, ...] = ("simple", "flat", "none")
_FORMAT = 1
CUSTOM = "custom"


@frozen
class Canonical:
    """The upstream URL prefixes the rewrites start from."""

    pypi_simple: str
    pypi_files: str
    pytorch: tuple[str, ...]
    kaolin: str
    conda_channel_alias: str
    conda_default_channels: tuple[str, ...]

    def ecosystem_of(self, prefix: str) -> Ecosystem | None:
        """Which ecosystem a canonical rewrite prefix belongs to (None: not one presets manage)."""
        if prefix in (self.pypi_simple, self.pypi_files):
            return "pypi"
        if prefix in self.pytorch:
            return "pytorch"
        if prefix == self.kaolin:
            return "kaolin"
        if prefix.startswith(self.conda_channel_alias) or prefix in self.conda_default_channels:
            return "conda"
        return None


@frozen
class PypiMirror:
    simple: str
    files: str | None = None
    on_miss: OnMiss = "unknown"
    verified: bool = False
    source: str = ""
    note: str = ""


@frozen
class PytorchMirror:
    layout: PytorchLayout
    url: str | None = None
    on_miss: OnMiss = "unknown"
    verified: bool = False
    source: str = ""
    note: str = ""


@frozen
class CondaMirror:
    default_channels: tuple[str, ...] = ()
    #: channel name -> base URL (conda appends the name), in file order.
    custom_channels: tuple[tuple[str, str], ...] = ()
    channel_alias: str | None = None
    on_miss: OnMiss = "unknown"
    verified: bool = False
    source: str = ""
    note: str = ""

    def base_urls(self) -> tuple[str, ...]:
        """Every URL this mirror contributes (to recognise its entries in a .condarc later)."""
        urls = [*self.default_channels, *(url for _, url in self.custom_channels)]
        if self.channel_alias:
            urls.append(self.channel_alias)
        return tuple(dict.fromkeys(urls))


@frozen
class Preset:
    name: str
    title: str
    source: str
    canonical: Canonical
    pypi: PypiMirror | None = None
    pytorch: PytorchMirror | None = None
    #: None: conda stays on its upstream channels (mirror entries are removed from .condarc).
    conda: CondaMirror | None = None
    kaolin: str | None = None
    #: A custom preset sets only the ecosystems given on the command line; a shipped preset sets
    #: all four (an absent section there means "upstream").
    partial: bool = False

    @property
    def is_official(self) -> bool:
        return self.name == "official"

    def covers(self, ecosystem: Ecosystem) -> bool:
        """Whether applying this preset changes ``ecosystem``'s settings at all."""
        if not self.partial:
            return True
        value = {
            "pypi": self.pypi,
            "pytorch": self.pytorch,
            "conda": self.conda,
            "kaolin": self.kaolin,
        }
        return value[ecosystem] is not None

    def torch_index(self) -> TorchIndex | None:
        """How pip is pointed at the PyTorch wheels; None where the canonical index is used."""
        mirror = self.pytorch
        if mirror is None or mirror.layout == "none" or mirror.url is None:
            return None
        if mirror.url in self.canonical.pytorch:
            return None
        return TorchIndex(layout=mirror.layout, url=mirror.url)

    def rewrites(self) -> tuple[Rewrite, ...]:
        """cuda-resolve's own canonical-prefix -> mirror-prefix rules for this preset."""
        canonical = self.canonical
        rules: list[Rewrite] = []

        def add(prefix: str, mirror: str, *, artifacts_only: bool = False) -> None:
            if prefix != mirror and all(rule.canonical != prefix for rule in rules):
                rules.append(
                    Rewrite(canonical=prefix, mirror=mirror, artifacts_only=artifacts_only)
                )

        if self.pypi is not None:
            add(canonical.pypi_simple, self.pypi.simple)
            if self.pypi.files:
                add(canonical.pypi_files, self.pypi.files)
        torch = self.torch_index()
        if torch is not None:
            for prefix in canonical.pytorch:
                add(prefix, torch.url, artifacts_only=torch.layout == "flat")
        if self.kaolin:
            add(canonical.kaolin, self.kaolin)
        if self.conda is not None:
            for name, base in self.conda.custom_channels:
                add(f"{canonical.conda_channel_alias}{name}/", f"{base}{name}/")
            for upstream, mirror in zip(
                canonical.conda_default_channels, self.conda.default_channels, strict=False
            ):
                if upstream.rstrip("/").rsplit("/", 1)[-1] == mirror.rstrip("/").rsplit("/", 1)[-1]:
                    add(upstream, mirror)
        return tuple(rules)


# -- loading ----------------------------------------------------------------------------


@cache
def load_presets() -> dict[str, Preset]:
    """All shipped presets by name, in file order."""
    text = resources.files(__package__).joinpath("presets.toml").read_text(encoding="utf-8")
    return parse_presets(text, origin="cuda_resolve/mirrors/presets.toml")


def get_preset(name: str) -> Preset:
    presets = load_presets()
    try:
        return presets[name]
    except KeyError:
        raise UsageError(
            f"unknown mirror preset {name!r}",
            hint=f"choose one of: {', '.join([*presets, CUSTOM])} (`cuda-resolve mirror list`)",
        ) from None


def parse_presets(text: str, *, origin: str) -> dict[str, Preset]:
    top = parse_toml_text(text, origin=origin, error=IndexDataError)
    version = top.integer("format")
    if version != _FORMAT:
        raise top.fail("format", f"= {version}: this cuda-resolve reads format {_FORMAT}")
    canonical_table = top.table("canonical", required=True)
    assert canonical_table is not None
    canonical = _canonical(canonical_table)
    presets_table = top.table("presets", required=True)
    assert presets_table is not None
    presets: dict[str, Preset] = {}
    for name, table in presets_table.sub_tables():
        presets[name] = _preset(name, table, canonical)
    presets_table.finish()
    top.finish()
    return presets


def _check_url(text: str) -> str:
    return parse_mirror_url(text)


def _url(table: Table, key: str) -> str:
    return str(table.parsed(key, _check_url))


def _url_or_none(table: Table, key: str) -> str | None:
    value = table.parsed(key, _check_url, None)
    return None if value is None else str(value)


def _urls(table: Table, key: str) -> tuple[str, ...]:
    out: list[str] = []
    for position, text in enumerate(table.strings(key, ())):
        try:
            out.append(parse_mirror_url(text))
        except ValueError as exc:
            raise table.fail(f"{key}[{position}]", f"= {text!r}: {exc}") from None
    return tuple(out)


def _choice(table: Table, key: str, options: tuple[str, ...], default: str) -> str:
    value = str(table.string(key, default))
    if value not in options:
        raise table.fail(key, f"= {value!r}: expected one of {', '.join(options)}")
    return value


def _canonical(table: Table) -> Canonical:
    canonical = Canonical(
        pypi_simple=_url(table, "pypi_simple"),
        pypi_files=_url(table, "pypi_files"),
        pytorch=_urls(table, "pytorch"),
        kaolin=_url(table, "kaolin"),
        conda_channel_alias=_url(table, "conda_channel_alias"),
        conda_default_channels=_urls(table, "conda_default_channels"),
    )
    table.finish()
    return canonical


def _preset(name: str, table: Table, canonical: Canonical) -> Preset:
    title = table.string("title")
    source = table.string("source")
    pypi = _pypi(table.table("pypi"))
    pytorch = _pytorch(table.table("pytorch"))
    conda = _conda(table.table("conda"))
    kaolin_table = table.table("kaolin")
    kaolin = None
    if kaolin_table is not None:
        kaolin = _url(kaolin_table, "url")
        kaolin_table.string("source", "")
        kaolin_table.finish()
    table.finish()
    return Preset(
        name=name,
        title=title,
        source=source,
        canonical=canonical,
        pypi=pypi,
        pytorch=pytorch,
        conda=conda,
        kaolin=kaolin,
    )


def _pypi(table: Table | None) -> PypiMirror | None:
    if table is None:
        return None
    mirror = PypiMirror(
        simple=_url(table, "simple"),
        files=_url_or_none(table, "files"),
        on_miss=_choice(table, "on_miss", _ON_MISS, "unknown"),  # type: ignore[arg-type]
        verified=table.boolean("verified", False),
        source=table.string("source"),
        note=table.string("note", ""),
    )
    table.finish()
    return mirror


def _pytorch(table: Table | None) -> PytorchMirror | None:
    if table is None:
        return None
    layout = _choice(table, "layout", _PYTORCH_LAYOUTS, "none")
    url = _url_or_none(table, "url")
    if layout != "none" and url is None:
        raise table.fail("url", f"is required when layout = {layout!r}")
    mirror = PytorchMirror(
        layout=layout,  # type: ignore[arg-type]
        url=url,
        on_miss=_choice(table, "on_miss", _ON_MISS, "unknown"),  # type: ignore[arg-type]
        verified=table.boolean("verified", False),
        source=table.string("source"),
        note=table.string("note", ""),
    )
    table.finish()
    return mirror


def _conda(table: Table | None) -> CondaMirror | None:
    if table is None:
        return None
    custom: list[tuple[str, str]] = []
    custom_table = table.table("custom_channels")
    if custom_table is not None:
        for channel in custom_table.keys():
            custom.append((channel, _url(custom_table, channel)))
        custom_table.finish()
    mirror = CondaMirror(
        default_channels=_urls(table, "default_channels"),
        custom_channels=tuple(custom),
        channel_alias=_url_or_none(table, "channel_alias"),
        on_miss=_choice(table, "on_miss", _ON_MISS, "unknown"),  # type: ignore[arg-type]
        verified=table.boolean("verified", False),
        source=table.string("source"),
        note=table.string("note", ""),
    )
    table.finish()
    return mirror


# -- custom URLs ------------------------------------------------------------------------


def _custom_url(option: str, text: str) -> str:
    try:
        return parse_mirror_url(text)
    except ValueError as exc:
        raise ConfigError(
            f"{option} {redact(text)!r}: {exc}",
            hint=f"give {option} an https:// URL, e.g. {option} https://mirror.example.edu/...",
        ) from None


def custom_preset(
    *,
    pypi: str | None = None,
    pypi_files: str | None = None,
    pytorch: str | None = None,
    pytorch_layout: str = "simple",
    kaolin: str | None = None,
    conda: str | None = None,
    conda_channels: tuple[str, ...] = ("conda-forge",),
) -> Preset:
    """A preset from URLs the user typed (``mirror set custom --pypi URL ...``).

    ``conda`` is the base of a TUNA-style Anaconda mirror (``<base>/pkgs/main``,
    ``<base>/cloud/<channel>``), the layout tunasync-based mirrors share.
    """
    if not any((pypi, pypi_files, pytorch, kaolin, conda)):
        raise UsageError(
            "mirror set custom: no mirror URL given",
            hint="give at least one of --pypi, --pytorch, --kaolin, --conda",
        )
    if pytorch_layout not in ("simple", "flat"):
        raise UsageError(
            f"--pytorch-layout {pytorch_layout!r}: expected 'simple' or 'flat'",
            hint="simple: a PEP 503 tree (<url><variant>/torch/); flat: one find-links "
            "page per variant",
        )
    canonical = load_presets()["official"].canonical
    pypi_mirror = None
    if pypi is not None or pypi_files is not None:
        simple = _custom_url("--pypi", pypi) if pypi is not None else canonical.pypi_simple
        pypi_mirror = PypiMirror(
            simple=simple,
            files=_custom_url("--pypi-files", pypi_files) if pypi_files is not None else None,
            source="given on the command line",
        )
    torch_mirror = None
    if pytorch is not None:
        torch_mirror = PytorchMirror(
            layout=pytorch_layout,  # type: ignore[arg-type]
            url=_custom_url("--pytorch", pytorch),
            source="given on the command line",
        )
    conda_mirror = None
    if conda is not None:
        base = _custom_url("--conda", conda)
        conda_mirror = CondaMirror(
            default_channels=tuple(f"{base}pkgs/{repo}/" for repo in ("main", "r", "msys2")),
            custom_channels=tuple((name, f"{base}cloud/") for name in conda_channels),
            source="given on the command line (TUNA-style layout assumed)",
        )
    return Preset(
        name=CUSTOM,
        title="custom mirror URLs",
        source="given on the command line",
        canonical=canonical,
        pypi=pypi_mirror,
        pytorch=torch_mirror,
        conda=conda_mirror,
        kaolin=_custom_url("--kaolin", kaolin) if kaolin is not None else None,
        partial=True,
    )
