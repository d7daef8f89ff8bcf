"""doctor: each machine scenario in tests/data/profiles/ gives the diagnoses the guides describe.

The index is the test one built from compat.md (tests/_factories.py), so an expectation here
does not move when the shipped index is edited; tests against the shipped index sit at the end.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest
from _factories import cc, cuda, drv, make_index

import cuda_resolve.cli.doctor
import cuda_resolve.index
from cuda_resolve.cli import main
from cuda_resolve.doctor.checks import CHECKS, run_checks, torch_arch_entries
from cuda_resolve.doctor.findings import Finding, worst
from cuda_resolve.environment import (
    Compiler,
    Driver,
    Environment,
    Gpu,
    Machine,
    PythonInfo,
    Toolkit,
    TorchInfo,
    Variables,
)
from cuda_resolve.index.model import ArchEntry, Index
from cuda_resolve.profile import load_profile

PROFILES = Path(__file__).parent / "data" / "profiles"
INDEX = make_index()

# check id, status, words that must appear in "found" + "fix" (in that order of preference)
Expect = tuple[str, str, tuple[str, ...]]

SCENARIOS: dict[str, tuple[int, list[Expect]]] = {
    # nvcc 11.8 cannot build for a CUDA 12.1 torch: a different major is a hard error (6).
    "rtx3090-torch21cu121-nvcc118": (
        1,
        [
            ("driver", "ok", ("535.104.05",)),
            ("smi-cuda-version", "info", ("12.2", "11.8")),
            ("torch-build", "ok", ()),
            ("torch-arch", "ok", ("8.6",)),
            (
                "nvcc-vs-torch",
                "error",
                ("nvcc 11.8", "12.1", "install a CUDA 12.x toolkit", "CUDA_HOME"),
            ),
            ("toolkit-arch", "ok", ("TORCH_CUDA_ARCH_LIST=8.6",)),
            ("host-compiler", "ok", ("11.4.0",)),
        ],
    ),
    # cu130 wheels start at sm_75 (4b): nothing runs on 6.1, the driver is fine.
    "gtx1080ti-driver580-torch211cu130": (
        1,
        [
            ("driver", "ok", ("580.95.05",)),
            ("smi-cuda-version", "info", ("no CUDA toolkit",)),
            ("torch-build", "ok", ()),
            (
                "torch-arch",
                "error",
                ("GTX 1080 Ti (6.1)", "no kernel image", "index", "--allow-torch-change"),
            ),
        ],
    ),
    "cpu-torch-on-a100": (
        1,
        [
            ("driver", "ok", ()),
            ("smi-cuda-version", "info", ()),
            ("torch-build", "error", ("2.1.0+cpu", "CPU build", "1 NVIDIA GPU", "CUDA variant")),
        ],
    ),
    # 13.0 drops sm_50..sm_72 (2); 10.2 .. 12.9 can target 6.1.
    "toolkit130-gtx1080": (
        1,
        [
            ("driver", "ok", ()),
            ("torch-build", "info", ("not installed",)),
            ("toolkit-arch", "error", ("nvcc 13.0", "6.1", "7.5", "CUDA 10.2 .. 12.9")),
            ("host-compiler", "ok", ("13.3.0",)),
        ],
    ),
    # 12.2's host_config.h stops at gcc 12 (3a); gcc 12.3.0 is installed.
    "gcc14-cuda122": (
        1,
        [
            ("driver", "ok", ()),
            ("torch-build", "ok", ()),
            (
                "torch-arch",
                "ok",
                ("5.0;6.0;7.0;7.5;8.0;8.6;9.0 covers 8.6",),
            ),  # the index's cu121 list
            ("nvcc-vs-torch", "warn", ("12.2", "12.1")),
            ("toolkit-arch", "ok", ()),
            (
                "host-compiler",
                "error",
                ("gcc 14.2.0", "gcc <= 12", "use gcc 12.3.0", "NVCC_CCBIN=g++-12", "CC=gcc-12"),
            ),
        ],
    ),
    "cuda-home-vs-path": (
        0,
        [
            ("driver", "ok", ()),
            ("smi-cuda-version", "info", ()),
            ("torch-build", "ok", ()),
            ("torch-arch", "ok", ()),
            ("nvcc-vs-torch", "ok", ("12.1",)),
            ("toolkit-arch", "ok", ()),
            ("host-compiler", "ok", ()),
            (
                "toolkits-agree",
                "warn",
                (
                    "CUDA_HOME=/usr/local/cuda-12.1 (CUDA 12.1)",
                    "/usr/local/cuda-11.8/bin/nvcc",
                    "export PATH=/usr/local/cuda-12.1/bin:$PATH",
                ),
            ),
        ],
    ),
    "nvcc-wrapper-no-cuda-home": (
        0,
        [
            ("driver", "ok", ()),
            ("torch-build", "ok", ()),
            ("torch-arch", "ok", ()),
            ("nvcc-vs-torch", "warn", ()),
            ("toolkit-arch", "ok", ()),
            ("host-compiler", "ok", ()),
            (
                "nvcc-wrapper",
                "warn",
                (
                    "compilers/bin/nvcc",
                    "CUDA_HOME=/opt/nvidia/hpc_sdk/Linux_x86_64/23.7/compilers",
                    "cuda_runtime_api.h",
                    "export CUDA_HOME=/opt/nvidia/hpc_sdk/Linux_x86_64/23.7/cuda/12.2",
                ),
            ),
        ],
    ),
    "minimal-toolkit-no-cusparse": (
        0,
        [
            ("driver", "ok", ()),
            ("smi-cuda-version", "info", ()),
            ("torch-build", "ok", ()),
            ("torch-arch", "ok", ()),
            ("nvcc-vs-torch", "ok", ()),
            ("toolkit-arch", "ok", ()),
            ("host-compiler", "ok", ()),
            (
                "toolkit-headers",
                "warn",
                (
                    "cusparse.h, cublas_v2.h",
                    "CPATH=/opt/conda/envs/kaolin/lib/python3.10/site-packages/nvidia/cusparse/include:/opt/conda/envs/kaolin/lib/python3.10/site-packages/nvidia/cublas/include",
                ),
            ),
        ],
    ),
    "slurm-job-no-cuda-home": (
        0,
        [
            ("driver", "ok", ()),
            ("smi-cuda-version", "info", ()),
            ("torch-build", "ok", ()),
            ("torch-arch", "ok", ()),
            ("nvcc-vs-torch", "ok", ()),
            ("toolkit-arch", "ok", ()),
            ("host-compiler", "ok", ()),
            (
                "slurm",
                "warn",
                (
                    "4817265",
                    "lacks CUDA_HOME:",
                    "export CUDA_HOME=/usr/local/cuda-12.1",
                    "LD_LIBRARY_PATH=/usr/local/cuda-12.1/lib64",
                ),
            ),
        ],
    ),
    "cpu-ci-no-driver": (
        0,
        [
            ("driver", "info", ("no NVIDIA driver", "CPU-only")),
            ("torch-build", "ok", ("cpu build",)),
        ],
    ),
    # CUDA 12.x needs >= 525.60.13 even with minor-version compatibility (1a).
    "driver470-torch21cu121": (
        1,
        [
            (
                "driver",
                "error",
                ("470.82.01", "12.1", ">= 525.60.13", "upgrade the NVIDIA driver", "CUDA <= 11.4"),
            ),
            ("smi-cuda-version", "info", ()),
            ("torch-build", "ok", ()),
            ("torch-arch", "ok", ()),
        ],
    ),
    "extension-needs-cudart11": (
        1,
        [
            ("driver", "ok", ()),
            ("smi-cuda-version", "info", ()),
            ("torch-build", "ok", ()),
            ("torch-arch", "ok", ()),
            (
                "extension-libs",
                "error",
                (
                    "pointnet2_ops/_ext",
                    "libcudart.so.11.0",
                    "cannot open shared object file",
                    "CUDA 12.1",
                    "LD_LIBRARY_PATH",
                ),
            ),
        ],
    ),
    # CUDA calls fail until the kernel module and the library agree again: an error, not a note.
    "nvml-version-mismatch": (
        1,
        [
            ("probe-notes", "error", ("Driver/library version mismatch", "reboot")),
            ("driver", "ok", ("550.54.14", "via sysfs")),
            ("smi-cuda-version", "info", ()),
            ("torch-build", "ok", ()),
            ("torch-arch", "ok", ("8.9",)),  # 8.9 runs the sm_86 SASS
        ],
    ),
    # 2.11 cu128 dropped sm_70 (4b): the H100 is covered, the V100 is not.
    "v100-h100-torch211cu128": (
        1,
        [
            ("driver", "ok", ()),
            ("smi-cuda-version", "info", ()),
            ("torch-build", "ok", ()),
            ("torch-arch", "error", ("Tesla V100-SXM2-32GB (7.0)",)),
        ],
    ),
    "h200-healthy-handwritten": (
        0,
        [
            ("driver", "ok", ("580.159.04", "13.0")),
            ("torch-build", "ok", ()),
            ("torch-arch", "ok", ("7.5;8.0;8.6;9.0;10.0;12.0 covers 9.0",)),
            ("nvcc-vs-torch", "ok", ()),
            ("toolkit-arch", "ok", ("TORCH_CUDA_ARCH_LIST=9.0",)),
            ("host-compiler", "ok", ()),
        ],
    ),
    # Written by `detect --save-profile` on the real H200 (docs/evidence/h200-2026-12-02.md).
    "h200-detected-2026-12-02": (
        0,
        [
            ("driver", "ok", ("580.159.04", "sysfs+libcuda")),
            ("torch-build", "ok", ()),
            ("torch-arch", "ok", ("covers 9.0",)),
            ("nvcc-vs-torch", "ok", ()),
            ("toolkit-arch", "ok", ("TORCH_CUDA_ARCH_LIST=9.0",)),
            ("host-compiler", "ok", ("13.3.0",)),
            ("extension-libs", "ok", ("6 extension(s)",)),
        ],
    ),
}


def _profile(name: str) -> Environment:
    return load_profile(PROFILES / f"{name}.toml", index=INDEX)


def _text(finding: Finding) -> str:
    return f"{finding.found} || {finding.fix or ''}"


def test_every_profile_has_a_scenario() -> None:
    assert sorted(p.stem for p in PROFILES.glob("*.toml")) == sorted(SCENARIOS)


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_scenario(name: str) -> None:
    exit_code, expected = SCENARIOS[name]
    findings = run_checks(_profile(name), INDEX)
    assert [(f.check, f.status) for f in findings] == [
        (check, status) for check, status, _ in expected
    ]
    for finding, (_, _, words) in zip(findings, expected, strict=True):
        for word in words:
            assert word in _text(finding), (finding.check, word, _text(finding))
        if finding.status in ("warn", "error"):
            assert finding.fix, finding  # every problem comes with what to do
    assert (1 if worst(findings) == "error" else 0) == exit_code


def test_torch_arch_error_names_only_uncovered_gpus() -> None:
    (finding,) = [
        f for f in run_checks(_profile("v100-h100-torch211cu128"), INDEX) if f.check == "torch-arch"
    ]
    assert "H100" not in finding.found


def test_slurm_with_variables_set_is_ok() -> None:
    env = _profile("slurm-job-no-cuda-home")
    fixed = dataclasses.replace(
        env,
        variables=Variables(
            cuda_home="/usr/local/cuda-12.1",
            ld_library_path="/usr/local/cuda-12.1/lib64:/opt/x",
            cuda_visible_devices="0",
        ),
    )
    (finding,) = [f for f in run_checks(fixed, INDEX) if f.check == "slurm"]
    assert finding.status == "ok"


def test_slurm_without_allocated_gpus() -> None:
    env = dataclasses.replace(
        _profile("slurm-job-no-cuda-home"),
        variables=Variables(
            cuda_home="/usr/local/cuda-12.1", ld_library_path="/usr/local/cuda-12.1/lib64"
        ),
    )
    (finding,) = [f for f in run_checks(env, INDEX) if f.check == "slurm"]
    assert finding.status == "warn"
    assert "CUDA_VISIBLE_DEVICES" in finding.found


def test_missing_headers_without_wheels_is_an_error() -> None:
    env = _profile("minimal-toolkit-no-cusparse")
    assert env.torch is not None
    bare = dataclasses.replace(env, torch=dataclasses.replace(env.torch, nvidia_wheels=()))
    (finding,) = [f for f in run_checks(bare, INDEX) if f.check == "toolkit-headers"]
    assert finding.status == "error"
    toolkit = bare.toolkits[0].version
    # The toolkit's own packages, not a placeholder (walk B12: "cuda-libraries-dev-X-Y").
    assert finding.fix == (
        "install the toolkit's math library headers (conda: "
        f"cuda-libraries-dev={toolkit}; apt, from NVIDIA's repository: "
        f"cuda-libraries-dev-{toolkit.major}-{toolkit.minor})"
    )


def test_host_compiler_without_a_workable_gcc() -> None:
    env = _profile("gcc14-cuda122")
    alone = dataclasses.replace(env, compiler=Compiler(gcc="14.2.0", other_gcc=("13.2.0",)))
    (finding,) = [f for f in run_checks(alone, INDEX) if f.check == "host-compiler"]
    assert finding.status == "error"
    assert finding.fix is not None and "install a gcc within CUDA 12.2's range" in finding.fix


def test_host_compiler_ignores_other_gcc_it_cannot_read() -> None:
    """Detection may record a name; only versions are offered as the fix."""
    env = _profile("gcc14-cuda122")
    named = dataclasses.replace(
        env, compiler=Compiler(gcc="14.2.0", other_gcc=("gcc-12", "11.4.0"))
    )
    (finding,) = [f for f in run_checks(named, INDEX) if f.check == "host-compiler"]
    assert finding.fix is not None and "use gcc 11.4.0" in finding.fix
    assert "gcc-12:" not in finding.fix


def test_host_compiler_prefers_what_nvcc_calls() -> None:
    env = _profile("gcc14-cuda122")
    ccbin = dataclasses.replace(
        env, compiler=Compiler(gcc="14.2.0", nvcc_host="g++-12", nvcc_host_version="12.3.0")
    )
    (finding,) = [f for f in run_checks(ccbin, INDEX) if f.check == "host-compiler"]
    assert finding.status == "ok"


def _machine(**changes: Any) -> Environment:
    base = Environment(
        machine=Machine(),
        python=PythonInfo(version="3.10.12"),
        driver=Driver(version=drv("535.104.05"), cuda=cuda("12.2")),
        gpus=(Gpu(index=0, name="NVIDIA GeForce RTX 3090", compute_capability=cc("8.6")),),
    )
    return dataclasses.replace(base, **changes)


def _only(env: Environment, check: str) -> Finding:
    found = [f for f in run_checks(env, INDEX) if f.check == check]
    assert len(found) == 1, found
    return found[0]


def test_cuda_home_symlink_agrees_with_the_resolved_root() -> None:
    """CUDA_HOME=/usr/local/cuda (a link on that machine) and PATH's nvcc in the same toolkit.

    Detection resolved both to /usr/local/cuda-12.1; the check must not consult this machine's
    filesystem, where /usr/local/cuda may point anywhere or nowhere.
    """
    same = _machine(
        toolkits=(
            Toolkit(version=cuda("12.1"), root="/usr/local/cuda-12.1", found_via="CUDA_HOME"),
            Toolkit(version=cuda("12.1"), root="/usr/local/cuda-12.1", found_via="PATH"),
        ),
        variables=Variables(cuda_home="/usr/local/cuda"),
    )
    assert _only(same, "toolkits-agree").status == "info"
    different = dataclasses.replace(
        same,
        toolkits=(
            Toolkit(version=cuda("12.1"), root="/usr/local/cuda-12.1", found_via="CUDA_HOME"),
            Toolkit(
                version=cuda("11.8"),
                root="/usr/local/cuda-11.8",
                nvcc="/usr/local/cuda-11.8/bin/nvcc",
                found_via="PATH",
            ),
        ),
    )
    finding = _only(different, "toolkits-agree")
    assert finding.status == "warn"
    assert "CUDA_HOME=/usr/local/cuda (CUDA 12.1)" in finding.found


def test_cuda_home_compared_without_the_filesystem(tmp_path: Path) -> None:
    real = tmp_path / "cuda-12.1"
    real.mkdir()
    link = tmp_path / "cuda"
    link.symlink_to(real)
    env = _machine(
        toolkits=(Toolkit(version=cuda("12.1"), root=str(real), found_via="PATH"),),
        variables=Variables(cuda_home=str(real) + "/"),
    )
    assert [f for f in run_checks(env, INDEX) if f.check == "toolkits-agree"] == []
    # A local symlink proves nothing about the profile's machine: no toolkit was found at
    # CUDA_HOME, so CUDA_HOME's text is compared as written.
    linked = dataclasses.replace(env, variables=Variables(cuda_home=str(link)))
    assert _only(linked, "toolkits-agree").status == "warn"


def test_toolkit_newer_than_the_driver() -> None:
    env = _machine(toolkits=(Toolkit(version=cuda("13.0"), root="/usr/local/cuda-13.0"),))
    finding = _only(env, "smi-cuda-version")
    assert finding.status == "error"
    assert "will not run here" in finding.found
    assert finding.fix is not None and "12.2" in finding.fix


def test_toolkit_equal_to_the_driver_says_nothing() -> None:
    env = _machine(toolkits=(Toolkit(version=cuda("12.2"), root="/usr/local/cuda-12.2"),))
    assert [f for f in run_checks(env, INDEX) if f.check == "smi-cuda-version"] == []


def test_no_driver_with_a_cuda_torch_warns() -> None:
    env = _machine(driver=None, gpus=(), torch=TorchInfo(version="2.1.0+cu121", cuda=cuda("12.1")))
    finding = _only(env, "driver")
    assert finding.status == "warn"
    assert "torch.cuda.is_available() will be False" in finding.found


def test_rocm_torch_on_an_nvidia_machine() -> None:
    env = _machine(torch=TorchInfo(version="2.5.1+rocm6.2", hip="6.2.41133"))
    finding = _only(env, "torch-build")
    assert finding.status == "error"
    assert "ROCm" in finding.found


def test_torch_unknown_to_the_index() -> None:
    env = _machine(torch=TorchInfo(version="1.7.1+cu110", cuda=cuda("11.0")))
    finding = _only(env, "torch-arch")
    assert finding.status == "info"
    assert "not known" in finding.found


def test_torch_arch_from_get_arch_list() -> None:
    torch = TorchInfo(
        version="2.8.0+cu129",
        cuda=cuda("12.9"),
        arch_list=("sm_70", "sm_90a", "sm_100", "sm_120", "compute_120"),
    )
    entries, origin = torch_arch_entries(_machine(torch=torch), INDEX)
    assert entries == (
        ArchEntry(cc("7.0")),
        ArchEntry(cc("9.0a")),
        ArchEntry(cc("10.0")),
        ArchEntry(cc("12.0")),
        ArchEntry(cc("12.0"), ptx=True),
    )
    assert origin == "torch.cuda.get_arch_list()"
    # PTX 12.0 covers a hypothetical 12.5; sm_90a does not cover 8.6 and nothing does
    assert (
        _only(
            _machine(torch=torch, gpus=(Gpu(index=0, name="x", compute_capability=cc("12.5")),)),
            "torch-arch",
        ).status
        == "ok"
    )
    assert _only(_machine(torch=torch), "torch-arch").status == "error"


def test_torch_arch_from_the_index_for_a_pypi_wheel_without_local_tag() -> None:
    torch = TorchInfo(version="2.11.0", cuda=cuda("13.0"))
    entries, origin = torch_arch_entries(_machine(torch=torch), INDEX)
    assert entries is not None and "12.0" in [str(e) for e in entries]
    assert "2.11.0+cu130" in origin


def test_cpu_torch_has_no_arch_entries() -> None:
    assert torch_arch_entries(_machine(torch=TorchInfo(version="2.1.0+cpu")), INDEX) == (None, "")


def test_working_extensions_are_ok() -> None:
    env = _profile("extension-needs-cudart11")
    fine = dataclasses.replace(env, extensions=env.extensions[1:])
    finding = _only(fine, "extension-libs")
    assert finding.status == "ok"
    assert "1 extension(s)" in finding.found


def test_an_extension_missing_libcudart_gets_a_rebuild_command_naming_it() -> None:
    """The fix names the package (what installed the .so) in a command that rebuilds it for the
    installed torch; it said `cuda-resolve plan <package>`, a placeholder (issue 29)."""
    env = _profile("extension-needs-cudart11")
    labelled = dataclasses.replace(
        env.extensions[0], distribution="pointnet2_ops 3.0.0+pt210cu118.sm80"
    )
    finding = _only(dataclasses.replace(env, extensions=(labelled,)), "extension-libs")
    assert "`cuda-pip install --rebuild pointnet2_ops`" in finding.fix, finding.fix
    assert "<" not in finding.fix
    unlabelled = _only(dataclasses.replace(env, extensions=env.extensions[:1]), "extension-libs")
    assert "<" not in unlabelled.fix and "LD_LIBRARY_PATH" in unlabelled.fix


def test_a_slurm_job_with_cuda_home_and_every_library_found_is_ok() -> None:
    """After the warning's own fix (`eval "$(cuda-resolve env)"`: CUDA_HOME and PATH, no
    LD_LIBRARY_PATH where every extension finds its libraries), doctor no longer warns: it
    asked for the toolkit's lib64 on LD_LIBRARY_PATH, which that fix never sets (user walk H7)."""
    env = _profile("slurm-job-no-cuda-home")
    fixed = dataclasses.replace(
        env,
        variables=dataclasses.replace(
            env.variables, cuda_home="/usr/local/cuda-12.1", cuda_visible_devices="0"
        ),
    )
    assert not any(ext.missing for ext in fixed.extensions)
    assert _only(fixed, "slurm").status == "ok"


def test_checks_are_pure_and_total() -> None:
    """Every check runs on a bare Environment and returns Findings with known statuses."""
    bare = Environment(machine=Machine(), python=PythonInfo(version="3.10"))
    for check in CHECKS:
        for finding in check(bare, INDEX):
            assert finding.status in ("ok", "info", "warn", "error")
    findings = run_checks(bare, INDEX)
    assert {f.check for f in findings} == {"driver", "torch-build"}
    assert worst(findings) == "info"
    assert worst([]) == "ok"


# -- the CLI -----------------------------------------------------------------------------


@pytest.fixture
def test_index(monkeypatch: pytest.MonkeyPatch) -> Index:
    """doctor and profile loading use the test index instead of the shipped one."""
    monkeypatch.setattr(cuda_resolve.cli.doctor, "default_index", lambda: INDEX)
    monkeypatch.setattr(cuda_resolve.index, "default_index", lambda: INDEX)
    return INDEX


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_doctor_json(name: str, test_index: Index, capsys: pytest.CaptureFixture[str]) -> None:
    exit_code, expected = SCENARIOS[name]
    path = PROFILES / f"{name}.toml"
    assert main(["doctor", "--profile", str(path), "--json"]) == exit_code
    out, err = capsys.readouterr()
    assert err == ""
    data = json.loads(out)
    assert set(data) == {"status", "environment", "findings"}
    assert data["status"] == worst(run_checks(load_profile(path, index=INDEX), INDEX))
    assert [(f["check"], f["status"]) for f in data["findings"]] == [(c, s) for c, s, _ in expected]
    for finding in data["findings"]:
        assert set(finding) == {"check", "status", "title", "found", "fix"}
    assert (
        data["environment"]["python"]["version"] == load_profile(path, index=INDEX).python.version
    )


@pytest.mark.parametrize("name", ["rtx3090-torch21cu121-nvcc118", "cpu-ci-no-driver"])
def test_doctor_tables(name: str, test_index: Index, capsys: pytest.CaptureFixture[str]) -> None:
    exit_code, expected = SCENARIOS[name]
    assert main(["doctor", "--profile", str(PROFILES / f"{name}.toml")]) == exit_code
    out, err = capsys.readouterr()
    assert err == ""
    assert "Checks" in out
    errors = sum(1 for _, status, _ in expected if status == "error")
    warnings = sum(1 for _, status, _ in expected if status == "warn")
    assert f"{errors} error(s), {warnings} warning(s)" in out


def test_detect_json_from_a_profile(test_index: Index, capsys: pytest.CaptureFixture[str]) -> None:
    path = PROFILES / "minimal-toolkit-no-cusparse.toml"
    assert main(["detect", "--profile", str(path), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["python"] == {
        "version": "3.10.14",
        "implementation": "cpython",
        "site_packages": ["/opt/conda/envs/kaolin/lib/python3.10/site-packages"],
        "prefix": "/opt/conda/envs/kaolin",
        "conda": True,
    }
    assert data["toolkit"][0]["missing_headers"] == ["cusparse.h", "cublas_v2.h"]
    assert data["torch"]["build"] == "cuda"
    assert len(data["torch"]["nvidia_wheels"]) == 2


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_detect_save_profile_reloads(
    name: str, tmp_path: Path, test_index: Index, capsys: pytest.CaptureFixture[str]
) -> None:
    source = PROFILES / f"{name}.toml"
    target = tmp_path / "saved.toml"
    assert main(["detect", "--profile", str(source), "--save-profile", str(target)]) == 0
    assert f"saved machine profile to {target}" in capsys.readouterr().out
    assert not (tmp_path / "saved.toml.tmp").exists()
    original = load_profile(source, index=INDEX)
    assert load_profile(target, index=INDEX) == dataclasses.replace(original, source=str(target))


def test_detect_save_profile_into_a_directory(
    tmp_path: Path, test_index: Index, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(
        [
            "detect",
            "--profile",
            str(PROFILES / "cpu-ci-no-driver.toml"),
            "--save-profile",
            str(tmp_path),
        ]
    )
    assert code == 2
    err = capsys.readouterr().err
    assert err.startswith("error: --save-profile")
    assert "is a directory" in err


def test_detect_save_profile_where_it_cannot_write(
    tmp_path: Path, test_index: Index, capsys: pytest.CaptureFixture[str]
) -> None:
    target = tmp_path / "no" / "such" / "dir" / "p.toml"
    code = main(
        [
            "detect",
            "--profile",
            str(PROFILES / "cpu-ci-no-driver.toml"),
            "--save-profile",
            str(target),
        ]
    )
    assert code == 2
    err = capsys.readouterr().err
    assert "cannot write" in err
    assert "hint:" in err


def test_doctor_tables_print_brackets_verbatim(
    tmp_path: Path, test_index: Index, capsys: pytest.CaptureFixture[str]
) -> None:
    """Paths and names are data, not rich markup: '[/lib64]' once raised MarkupError."""
    profile = tmp_path / "lab[a100].toml"
    profile.write_text(
        '[python]\nversion = "3.10"\nexecutable = "/envs/[k]/bin/python"\n'
        '[driver]\nversion = "535.104.05"\ncuda = "12.2"\n'
        '[[gpu]]\nname = "A100 [/mig]"\ncompute_capability = "8.0"\n'
        '[torch]\nversion = "2.1.0+cu121"\n'
        '[[extension]]\npath = "/site/[x]/_ext.so"\nneeded = ["libcudart.so.11.0"]\nmissing = '
        '["libcudart.so.11.0"]\n',
        encoding="utf-8",
    )
    assert main(["doctor", "--profile", str(profile)]) == 1
    out = capsys.readouterr().out.replace("\n", "").replace("│", "").replace(" ", "")
    for text in ("lab[a100].toml", "/envs/[k]/bin/python", "A100[/mig]", "/site/[x]/_ext.so"):
        assert text.replace(" ", "") in out, text


def test_detect_save_profile_message_names_the_file(
    tmp_path: Path, test_index: Index, capsys: pytest.CaptureFixture[str]
) -> None:
    target = tmp_path / ("a-rather-long-directory-name-" * 3) / "lab[a100].toml"
    target.parent.mkdir()
    assert (
        main(
            [
                "detect",
                "--profile",
                str(PROFILES / "cpu-ci-no-driver.toml"),
                "--save-profile",
                str(target),
            ]
        )
        == 0
    )
    assert capsys.readouterr().out == f"saved machine profile to {target}\n"
    assert load_profile(target).python.version == "3.11.7"


# -- against the shipped index -------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_scenario_with_the_shipped_index(name: str) -> None:
    from cuda_resolve.index import default_index

    shipped = default_index()
    exit_code, expected = SCENARIOS[name]
    findings = run_checks(load_profile(PROFILES / f"{name}.toml"), shipped)
    assert [(f.check, f.status) for f in findings] == [
        (check, status) for check, status, _ in expected
    ]
    assert (1 if worst(findings) == "error" else 0) == exit_code


@pytest.mark.parametrize("name", ["gtx1080ti-driver580-torch211cu130", "h200-healthy-handwritten"])
def test_doctor_cli_with_the_shipped_index(name: str, capsys: pytest.CaptureFixture[str]) -> None:
    exit_code, expected = SCENARIOS[name]
    assert main(["doctor", "--profile", str(PROFILES / f"{name}.toml"), "--json"]) == exit_code
    data = json.loads(capsys.readouterr().out)
    assert [(f["check"], f["status"]) for f in data["findings"]] == [(c, s) for c, s, _ in expected]


@pytest.mark.parametrize(
    "name", ["nvcc-wrapper-no-cuda-home", "minimal-toolkit-no-cusparse", "extension-needs-cudart11"]
)
def test_doctor_tables_never_cut_a_path(
    name: str, test_index: Index, capsys: pytest.CaptureFixture[str]
) -> None:
    """At 80 columns long paths fold onto more lines; the fix must stay complete."""
    main(["doctor", "--profile", str(PROFILES / f"{name}.toml")])
    out = capsys.readouterr().out
    assert "…" not in out


def test_missing_headers_without_torch_only_warn() -> None:
    """No torch yet: nothing fails to build today, and a PyPI torch would bring the headers."""
    env = dataclasses.replace(_profile("minimal-toolkit-no-cusparse"), torch=None)
    finding = _only(env, "toolkit-headers")
    assert finding.status == "warn"
    assert "cusparse.h" in finding.found


def test_detect_save_profile_of_this_machine_reloads(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Real detection (no --profile): the saved file reads back to what --json printed."""
    target = tmp_path / "this-machine.toml"
    assert main(["detect", "--save-profile", str(target), "--json"]) == 0
    printed = json.loads(capsys.readouterr().out)
    reloaded = load_profile(target)
    from cuda_resolve.profile import environment_to_dict

    assert environment_to_dict(reloaded) == printed
    assert main(["doctor", "--profile", str(target), "--json"]) in (0, 1)
    assert json.loads(capsys.readouterr().out)["environment"] == printed


@pytest.mark.parametrize(("clang", "status"), [("16.0.6", "ok"), ("17.0.6", "error")])
def test_clang_as_nvcc_host_is_judged_as_clang(clang: str, status: str) -> None:
    """NVCC_CCBIN=clang++-17: 17 is clang's version, not a gcc 17 (12.2 accepts clang <= 16)."""
    facts = INDEX.toolkit(cuda("12.2"))
    assert facts is not None
    index = dataclasses.replace(INDEX, toolkits=(dataclasses.replace(facts, clang_max=16),))
    env = dataclasses.replace(
        _profile("gcc14-cuda122"),
        compiler=Compiler(
            gcc="12.3.0", clang=clang, nvcc_host="/usr/bin/clang++-17", nvcc_host_version=clang
        ),
    )
    (finding,) = [f for f in run_checks(env, index) if f.check == "host-compiler"]
    assert finding.status == status
    assert f"clang {clang}" in finding.found
    assert "gcc 17" not in finding.found
