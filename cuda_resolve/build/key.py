"""The wheelhouse key a build is stored and found under: what a plan needs of a build, without
the layers that carry one out (the builder, the wheelhouse store, the process runner)."""

from __future__ import annotations

from ..wheelhouse.key import WheelKey
from .preflight import BuildSpec
from .source import SourceIdentity, source_recipe_digest

__all__ = ["keyed_to_source", "wheel_key"]


def wheel_key(spec: BuildSpec, source: SourceIdentity | None = None) -> WheelKey:
    """``source``: the ``--source`` tree the build reads, where it is not the pinned source."""
    return WheelKey(
        package=spec.package,
        version=str(spec.recipe.version),
        torch=spec.torch_version,
        variant=spec.variant,
        python_tag=spec.python_tag,
        platform=spec.platform,
        arch_list=spec.arch_list,
        recipe_digest=source_recipe_digest(spec.recipe, spec.torch_version, source),
    )


def keyed_to_source(key: WheelKey, spec: BuildSpec, source: SourceIdentity | None) -> WheelKey:
    """``key`` (a plan's, perhaps of a wheel built for more GPUs) where it names the source a
    build now reads, else the build's own key: a plan made from another tree, or before the tree
    was edited, must not name what this build publishes."""
    own = wheel_key(spec, source)
    return key if key.recipe_digest == own.recipe_digest else own
