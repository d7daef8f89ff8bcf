"""The wheelhouse key a build is stored and found under: what a plan needs of a build, without
the layers that carry one out (the builder, the wheelhouse store, the process runner)."""

from __future__ import annotations

from ..wheelhouse.key import WheelKey
from .preflight import BuildSpec
from .source import recipe_digest

__all__ = ["wheel_key"]


def wheel_key(spec: BuildSpec) -> WheelKey:
    return WheelKey(
        package=spec.package,
        version=str(spec.recipe.version),
        torch=spec.torch_version,
        variant=spec.variant,
        python_tag=spec.python_tag,
        platform=spec.platform,
        arch_list=spec.arch_list,
        recipe_digest=recipe_digest(spec.recipe, spec.torch_version),
    )
