"""The builder with a recording fake runner: no compiler, no real pip, a fraction of a second each.

:func:`cuda_resolve.build.builder.build` takes the target's
:class:`~cuda_resolve.install.pip.TargetPip`, which runs every command through its
:class:`~cuda_resolve.build.runner.ProcessRunner` (pypa/build's runner pattern). The fake here
records each command, its environment and folder, and plays pip: ``pip install --target DIR``
makes the folder, ``pip wheel -w DIR`` writes a real (tiny) wheel there. That is enough to check
what the builder promises: one wheel per key however many builders ask at once, every pip call
with the target's interpreter, trust options and environment (the torch step's without the
variables that add indexes), the user's pip options passed on (except those that choose where or
what pip installs), ``pip wheel --no-build-isolation --no-deps`` in the source folder, and a
failed or interrupted build that leaves no folder, no entry and no held lock.
"""

from __future__ import annotations

import base64
import hashlib
import io
import tempfile
import threading
import time
import zipfile
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import filelock
import pytest
from packaging.version import Version

from cuda_resolve._signals import Terminated
from cuda_resolve.build.builder import BuildResult, build, wheel_key
from cuda_resolve.build.spec import BuildSpec
from cuda_resolve.environment import Toolkit
from cuda_resolve.errors import BuildError
from cuda_resolve.index.model import Recipe
from cuda_resolve.install.pip import TORCH_INDEX_ONLY_CLEARED, TargetPip
from cuda_resolve.versions import CudaVersion
from cuda_resolve.wheelhouse.store import Wheelhouse

PYTHON = "/target/bin/python"
TRUST = ("--use-feature=truststore",)
TORCH_INDEX = "https://download.pytorch.org/whl/cu130/"
#: The user's environment: pip configuration that the torch step must not see, and one that stays.
USER_ENV = {
    "PATH": "/usr/bin:/bin",
    "PIP_FIND_LINKS": "/wheels/cpu-torch",
    "PIP_EXTRA_INDEX_URL": "https://extra.example/simple",
    "PIP_INDEX_URL": "https://mirror.example/simple",
    "PIP_NO_INDEX": "0",
    "PIP_CERT": "/etc/ssl/lab-ca.pem",
}


@dataclass
class Ran:
    command: list[str]
    environ: dict[str, str]
    log_path: Path
    cwd: Path | None


@dataclass
class FakePip:
    """A ProcessRunner that records every command and plays ``pip install --target`` and ``pip
    wheel``."""

    runs: list[Ran] = field(default_factory=list)
    fail: str | None = None  # "install" or "wheel": that command exits 1 with an ERROR line
    during_wheel: Callable[[], None] = lambda: (
        None
    )  # runs inside `pip wheel` (a wait, an interrupt)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def __call__(
        self,
        command: Sequence[str],
        *,
        environ: Mapping[str, str],
        log_path: Path,
        cwd: Path | None = None,
        on_line: Callable[[str], None] = lambda _: None,
    ) -> tuple[int, list[str]]:
        with self.lock:
            self.runs.append(Ran(list(command), dict(environ), log_path, cwd))
        verb = command[3]
        with open(log_path, "a", encoding="utf-8") as log:
            log.write(f"$ {' '.join(command)}\n")
        if self.fail == verb:
            on_line("ERROR: No matching distribution found for ninja")
            return 1, [
                "Looking in indexes: https://mirror.example/simple",
                "ERROR: No matching distribution found for ninja",
            ]
        if verb == "install":
            Path(_value(command, "--target")).mkdir(parents=True, exist_ok=True)
        elif verb == "wheel":
            self.during_wheel()
            out = Path(_value(command, "-w"))
            out.mkdir(parents=True, exist_ok=True)
            _write_wheel(out / "fakeext-1.0-cp311-cp311-linux_x86_64.whl")
            for step in ("[1/2] nvcc fake.cu", "[2/2] c++ fake.o"):
                on_line(step)
        return 0, ["done"]

    def verbs(self) -> list[str]:
        return [run.command[3] for run in self.runs]


def _value(command: Sequence[str], option: str) -> str:
    return command[list(command).index(option) + 1]


def _write_wheel(path: Path) -> None:
    dist = "fakeext-1.0.dist-info"
    contents = {
        "fakeext/__init__.py": "VALUE = 1\n",
        f"{dist}/METADATA": "Metadata-Version: 2.1\nName: fakeext\nVersion: 1.0\n",
        f"{dist}/WHEEL": (
            "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: false\nTag: "
            "cp311-cp311-linux_x86_64\n"
        ),
    }
    record = []
    for name, text in contents.items():
        digest = (
            base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b"=").decode()
        )
        record.append(f"{name},sha256={digest},{len(text.encode())}")
    contents[f"{dist}/RECORD"] = "\n".join([*record, f"{dist}/RECORD,,"]) + "\n"
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for name, text in contents.items():
            archive.writestr(name, text)
    path.write_bytes(buffer.getvalue())


def _spec(
    *,
    build_requires: tuple[str, ...] = ("setuptools>=77", "ninja"),
    torch_requirement: str | None = "torch==2.14.1",
) -> BuildSpec:
    recipe = Recipe(
        name="fakeext-test",
        package="fakeext",
        version=Version("1.0"),
        repository="https://example.invalid/fakeext",
        revision="0" * 40,
        build_requires=build_requires,
    )
    return BuildSpec(
        recipe=recipe,
        package="fakeext",
        import_name="fakeext",
        python=PYTHON,
        python_tag="cp311",
        platform="linux_x86_64",
        torch_version="2.14.1",
        torch_requirement=torch_requirement,
        torch_index=TORCH_INDEX if torch_requirement else None,
        variant="cu130",
        toolkit=Toolkit(version=CudaVersion(13, 0), root="/usr/local/cuda-13.0"),
        arch_list="9.0",
        variables=(("CUDA_HOME", "/usr/local/cuda-13.0"), ("TORCH_CUDA_ARCH_LIST", "9.0")),
        build_requires=build_requires,
        max_jobs=2,
    )


@pytest.fixture
def scratch(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """The builds' temporary folder: empty again after every build, whatever happened."""
    folder = tmp_path / "tmp"
    folder.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(folder))
    yield folder


@pytest.fixture
def source(tmp_path: Path) -> Path:
    folder = tmp_path / "src"
    folder.mkdir()
    (folder / "setup.py").write_text("raise SystemExit('the fake runner never runs this')\n")
    return folder


def _pip(fake: FakePip, tmp_path: Path) -> TargetPip:
    return TargetPip(
        PYTHON, environ=USER_ENV, trust=TRUST, log_path=tmp_path / "unused.log", runner=fake
    )


def _build(
    fake: FakePip,
    tmp_path: Path,
    source: Path,
    *,
    spec: BuildSpec | None = None,
    pip_options: Sequence[str] = (),
    installed: Mapping[str, str] | None = None,
) -> BuildResult:
    return build(
        spec or _spec(),
        Wheelhouse(tmp_path / "wheelhouse"),
        source_dir=source,
        installed=dict(installed if installed is not None else {"setuptools": "65.5.0"}),
        environ=USER_ENV,
        pip=_pip(fake, tmp_path),
        pip_options=pip_options,
    )


def test_every_pip_call_of_a_build_runs_through_the_target_pip(
    tmp_path: Path, scratch: Path, source: Path
) -> None:
    fake = FakePip()
    result = _build(
        fake,
        tmp_path,
        source,
        pip_options=[
            "--proxy",
            "http://proxy.example:3128",
            "-c",
            "/lab/constraints.txt",
            "--target",
            "/user/site",
            "--no-deps",
            "--user",
            "-r",
            "/user/reqs.txt",
        ],
    )
    assert fake.verbs() == [
        "install",
        "install",
        "wheel",
    ]  # torch into the overlay, build requirements, the build
    torch, requirements, wheel = fake.runs
    for run in fake.runs:
        # The target's interpreter, pip's own words, then the trust options: for every command.
        assert run.command[:3] == [PYTHON, "-m", "pip"]
        assert run.command[4:6] == ["--disable-pip-version-check", *TRUST]
        assert run.log_path == result.log  # one build log holds every command's output
        assert run.environ["PIP_CERT"] == USER_ENV["PIP_CERT"]
    overlay = _value(torch.command, "--target")
    assert _value(requirements.command, "--target") == overlay and Path(overlay).name == "overlay"

    # The torch step asks the PyTorch index alone: pip's variables that add indexes are not there.
    assert torch.command[-3:] == ["torch==2.14.1", "--index-url", TORCH_INDEX]
    assert not set(TORCH_INDEX_ONLY_CLEARED) & set(torch.environ)
    # The build requirements honour the user's pip configuration (their mirror).
    assert {
        name: requirements.environ[name]
        for name in ("PIP_INDEX_URL", "PIP_FIND_LINKS", "PIP_EXTRA_INDEX_URL")
    } == {
        name: USER_ENV[name] for name in ("PIP_INDEX_URL", "PIP_FIND_LINKS", "PIP_EXTRA_INDEX_URL")
    }
    assert requirements.command[-2:] == ["setuptools>=77", "ninja"]

    # The user's network and resolution options reach both overlay installs; those that choose
    # where or what pip installs do not (the overlay is its own --target, and complete).
    for run in (torch, requirements):
        words = run.command
        assert words[words.index("--proxy") + 1] == "http://proxy.example:3128"
        assert words[words.index("-c") + 1] == "/lab/constraints.txt"
        assert words.count("--target") == 1 and "/user/site" not in words
        assert "--no-deps" not in words and "--user" not in words and "/user/reqs.txt" not in words

    # pip wheel: no isolation (the target's torch), no dependencies, in the source copy, with the
    # build's variables and the overlay first on the import path.
    assert wheel.command[3] == "wheel" and {"--no-build-isolation", "--no-deps"} <= set(
        wheel.command
    )
    assert "--proxy" not in wheel.command  # the build asks no index
    assert wheel.cwd is not None and wheel.command[-1] == str(wheel.cwd)
    assert wheel.environ["TORCH_CUDA_ARCH_LIST"] == "9.0" and wheel.environ["MAX_JOBS"] == "2"
    assert wheel.environ["PYTHONPATH"].split(":")[0] == overlay
    assert (
        wheel.environ["PIP_INDEX_URL"] == USER_ENV["PIP_INDEX_URL"]
    )  # the user's environment, under the build's

    assert (
        not result.cache_hit
        and result.wheel.path.is_file()
        and "+pt2141cu130.sm90" in result.wheel.path.name
    )
    assert list(scratch.iterdir()) == []  # the build folder, overlay and source copy are gone


def test_nothing_goes_into_an_overlay_the_target_does_not_need(
    tmp_path: Path, scratch: Path, source: Path
) -> None:
    fake = FakePip()
    result = _build(
        fake,
        tmp_path,
        source,
        spec=_spec(torch_requirement=None),
        installed={"setuptools": "80.0", "ninja": "1.11"},
    )
    assert fake.verbs() == ["wheel"]
    assert (
        "PYTHONPATH" not in fake.runs[0].environ
        or "overlay" not in fake.runs[0].environ["PYTHONPATH"]
    )
    assert result.wheel.path.is_file()


def test_a_builder_without_a_pip_runner_runs_the_specs_interpreter_through_the_process_runner(
    tmp_path: Path, scratch: Path, source: Path
) -> None:
    fake = FakePip()
    result = build(
        _spec(torch_requirement=None),
        Wheelhouse(tmp_path / "wheelhouse"),
        source_dir=source,
        installed={"setuptools": "80.0"},
        environ=USER_ENV,
        runner=fake,
    )
    assert fake.verbs() == ["install", "wheel"]
    assert all(
        run.command[:3] == [PYTHON, "-m", "pip"] and run.command[4] == "--disable-pip-version-check"
        for run in fake.runs
    )
    assert all(run.log_path == result.log for run in fake.runs)


def test_two_builders_of_one_key_make_one_wheel(
    tmp_path: Path, scratch: Path, source: Path
) -> None:
    """The second builder waits on the key's lock while the first compiles, then finds its wheel."""
    second_started = threading.Event()

    def slow_compile() -> None:  # the first builder's `pip wheel` runs until the second is waiting
        assert second_started.wait(10)
        time.sleep(0.5)

    fake = FakePip(during_wheel=slow_compile)
    results: list[BuildResult] = []
    errors: list[BaseException] = []

    def builder(started: threading.Event | None) -> None:
        if started is not None:
            started.set()
        try:
            results.append(_build(fake, tmp_path, source))
        except BaseException as exc:
            errors.append(exc)

    first = threading.Thread(target=builder, args=(None,))
    first.start()
    deadline = time.monotonic() + 10
    while "wheel" not in fake.verbs() and time.monotonic() < deadline:
        time.sleep(0.01)
    second = threading.Thread(target=builder, args=(second_started,))
    second.start()
    first.join(20)
    second.join(20)
    assert not errors, errors
    assert fake.verbs().count("wheel") == 1, fake.verbs()
    assert sorted(r.cache_hit for r in results) == [False, True]
    assert results[0].wheel.path == results[1].wheel.path
    assert len(list((tmp_path / "wheelhouse").rglob("*.whl"))) == 1


def test_a_failed_overlay_install_names_pips_error_and_leaves_nothing(
    tmp_path: Path, scratch: Path, source: Path
) -> None:
    fake = FakePip(fail="install")
    with pytest.raises(
        BuildError,
        match="installing build requirements into the overlay failed: ERROR: No matching "
        "distribution",
    ):
        _build(fake, tmp_path, source)
    assert fake.verbs() == ["install"]  # nothing was built after it
    assert list(scratch.iterdir()) == []
    assert not list((tmp_path / "wheelhouse").rglob("*.whl"))


@pytest.mark.parametrize(
    "interrupt", [KeyboardInterrupt(), Terminated(15)], ids=["ctrl-c", "sigterm"]
)
def test_an_interrupted_build_leaves_no_folder_no_entry_and_a_free_lock(
    tmp_path: Path, scratch: Path, source: Path, interrupt: KeyboardInterrupt
) -> None:
    def interrupted() -> None:
        raise interrupt

    fake = FakePip(during_wheel=interrupted)
    with pytest.raises(KeyboardInterrupt) as raised:
        _build(fake, tmp_path, source)
    assert raised.value is interrupt  # SIGTERM stays SIGTERM (exit 143), not a plain Ctrl-C
    assert list(scratch.iterdir()) == []
    wheelhouse = tmp_path / "wheelhouse"
    assert not list(wheelhouse.rglob("*.whl"))
    lock = filelock.FileLock(str(Wheelhouse(wheelhouse).lock_path(wheel_key(_spec()))))
    lock.acquire(timeout=0)  # raises filelock.Timeout if the key were still held
    lock.release()
