"""The lock's record of a source build names the arch list of the wheel it locks (issue 29: a
line true where it is read). A profile whose GPUs a wheel built for more GPUs covers reuses that
wheel: its record said the profile's own arch list ("arch list 8.0") beside the key and label of
a wheel built for 8.0;9.0."""

from __future__ import annotations

from pathlib import Path

from test_lock_builds import _publish, built_bench  # noqa: F401  (fixture)


def test_a_reused_wheel_is_recorded_with_its_own_arch_list(
    built_bench: dict[str, object],
) -> None:
    from cuda_resolve.config import load_config
    from cuda_resolve.index import default_index
    from cuda_resolve.lock.make import _build_line, profile_plan
    from cuda_resolve.lock.profiles import load_lock_profile
    from cuda_resolve.resolve import Options
    from cuda_resolve.wheelhouse.store import Wheelhouse

    _publish(built_bench, "a100-h200")  # a wheel with kernels for 8.0 and 9.0
    _, a100, _ = built_bench["profiles"]  # type: ignore[misc]
    house = built_bench["house"]
    assert isinstance(house, Wheelhouse)
    plan, _ = profile_plan(
        load_lock_profile(str(Path(str(a100)))),
        ["torch", "pointnet2_ops"],
        default_index(),
        Options(),
        load_config(),
        house,
    )
    (build,) = plan.builds
    assert build.key.arch_list == "8.0;9.0", build.key  # the covering wheel, reused
    line = _build_line(build)
    assert "arch list 8.0;9.0;" in line and ".sm80.sm90." in line, line
