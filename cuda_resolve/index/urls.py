"""Expand a package's ``find_links`` / ``wheel_url`` pattern for one torch build.

The placeholders (docs/index-format.md) are the ones extension projects put in their URLs:

===================  ===================================  =============================
placeholder          meaning                              torch 2.5.1+cu124, Python 3.10
===================  ===================================  =============================
``{torch}``          torch base version                   ``2.5.1``
``{torch_minor}``    torch major.minor                    ``2.5``
``{torch_nodot}``    torch base version without dots      ``251``
``{variant}``        the build's local label              ``cu124``
``{cuda}``           its CUDA version                     ``12.4``
``{cuda_nodot}``     its CUDA version without the dot     ``124``
``{python_nodot}``   Python major+minor                   ``310``
``{python_tag}``     wheel Python tag (wheel_url only)    ``cp310``
``{abi_tag}``        wheel ABI tag (wheel_url only)       ``cp310`` (``cp313t`` for 3.13t)
``{platform}``       wheel platform tag (wheel_url only)  ``linux_x86_64``
``{version}``        the package version (wheel_url only) ``0.18.0``
===================  ===================================  =============================

A pattern that needs a value the build does not have (``{cuda_nodot}`` for a cpu build, or
``{python_nodot}`` when no Python was given) expands to ``None``: there is no such page.
"""

from __future__ import annotations

import string

from packaging.version import Version

from ..versions import CudaVersion

__all__ = ["expand_pattern", "pattern_fields"]


def pattern_fields(
    *,
    torch: str,
    variant: str,
    python: str | None = None,
    version: str | None = None,
    platform: str | None = None,
) -> dict[str, str]:
    """The placeholder values for one torch build (see the module docstring)."""
    base = Version(torch).base_version
    release = Version(base).release
    fields = {
        "torch": base,
        "torch_minor": f"{release[0]}.{release[1] if len(release) > 1 else 0}",
        "torch_nodot": base.replace(".", ""),
        "variant": variant,
    }
    if variant != "cpu":
        cuda = CudaVersion.parse(variant)
        fields["cuda"] = str(cuda)
        fields["cuda_nodot"] = f"{cuda.major}{cuda.minor}"
    if python is not None:
        digits = python.removesuffix("t").replace(".", "")
        fields["python_nodot"] = digits
        fields["python_tag"] = f"cp{digits}"
        fields["abi_tag"] = f"cp{digits}{'t' if python.endswith('t') else ''}"
    if version is not None:
        fields["version"] = version
    if platform is not None:
        fields["platform"] = platform
    return fields


def expand_pattern(
    pattern: str,
    *,
    torch: str,
    variant: str,
    python: str | None = None,
    version: str | None = None,
    platform: str | None = None,
) -> str | None:
    """``pattern`` with its placeholders filled, or ``None`` if one has no value here."""
    fields = pattern_fields(torch=torch, variant=variant, python=python, version=version, platform=platform)
    needed = {name for _, name, _, _ in string.Formatter().parse(pattern) if name is not None}
    if not needed <= fields.keys():
        return None
    return pattern.format(**fields)
