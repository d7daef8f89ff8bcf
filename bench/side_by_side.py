"""Side by side: which torch build cuda-resolve, uv's ``--torch-backend=auto`` and light-the-torch
pick for the same machines, whether that build has kernels for every GPU, and how many bytes a
plan or dry run downloads (issue 19).

Run (uv and light-the-torch live in a scratch venv outside the repo, never in pyproject):

    python3.11 -m venv /work/scratch/sbs-venv
    /work/scratch/sbs-venv/bin/pip install uv light-the-torch
    python3.11 -m venv /work/scratch/sbs-cputorch
    /work/scratch/sbs-cputorch/bin/pip install torch==2.13.0 light-the-torch   # a CPU torch
    .venv/bin/python bench/side_by_side.py

How each tool is told about the machine (nothing here has a GPU):

- cuda-resolve: ``plan torch --profile FILE --json`` (the machine-class profiles), or for the
  CPU-torch case the real venv through ``--python`` with ``CUDA_RESOLVE_DRIVER`` /
  ``CUDA_RESOLVE_CUDA_ARCH``.
- uv: ``UV_CUDA_DRIVER_VERSION``, uv's own override, read before ``/sys/module/nvidia/version``,
  ``/proc/driver/nvidia/version`` and ``nvidia-smi`` (none of which exist here). uv's auto mode
  reads only the driver version; no GPU fact reaches it. Without a driver nothing is set and
  ``nvidia-smi`` is kept off PATH.
- light-the-torch: it reads only ``nvidia-smi --query-gpu=driver_version --format=csv``; a
  script on PATH prints the profile's driver version (that script is the only thing faked, and it
  is exactly what ltt reads). Its ``LTT_PYTORCH_COMPUTATION_BACKEND`` overrides the backend itself,
  so it cannot show what ltt would choose.

download.pytorch.org cannot be reached here, so uv and ltt cannot finish. Their decision is read
from their own output (uv's debug log names the PyTorch indexes it queries, newest CUDA first; ltt's
own ``detect_compatible_computation_backends()`` gives the backends it would accept) and completed
with each tool's documented rule against the same index facts cuda-resolve uses
(``default_index()``): uv takes the first index in its order that carries torch (uv's default
``first-index`` strategy), then the newest torch there; ltt sorts candidates by (backend, version)
and takes the highest. Whether a build has kernels for a GPU is ``compat.build_covers_gpu`` on the
index's arch list of that build, the same rule for all three tools.

Bytes: each command runs with HTTPS_PROXY/HTTP_PROXY pointing at a loopback CONNECT proxy in this
process that relays to the real host and counts the bytes it sends back.
"""

from __future__ import annotations

import json
import os
import re
import select
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cuda_resolve.compat import build_covers_gpu
from cuda_resolve.index import default_index
from cuda_resolve.index.model import Index, TorchRelease
from cuda_resolve.versions import ComputeCapability

REPO = Path(__file__).resolve().parent.parent
SCRATCH = Path("/work/scratch")
SBS_VENV = SCRATCH / "sbs-venv"
CPU_TORCH_VENV = SCRATCH / "sbs-cputorch"
DATE = "2026-12-03"
RESULTS = REPO / "bench" / "results"
UV_TIMEOUT_S = 60
# A dry run that falls back to PyPI (ltt does when the PyTorch index fails) fetches whole torch
# wheels: 6.7 GB filled this machine's disk once. The proxy cuts every run off at this many bytes.
BYTE_CAP = 64 * 1024 * 1024


@dataclass(frozen=True)
class Machine:
    key: str
    title: str
    python: str
    driver: str | None
    gpus: tuple[tuple[str, str], ...]  # (name, compute capability) the torch must run on
    profile: str | None  # cuda-resolve --profile, relative to the repo
    installed_venv: Path | None = None  # a real venv whose installed torch the tools see
    note: str = ""


MACHINES = (
    Machine(
        "pascal-580",
        "GTX 1080 Ti (Pascal, sm_61), driver 580",
        "3.11",
        "580.95.05",
        (("GTX 1080 Ti", "6.1"),),
        "tests/data/profiles/gtx1080ti-driver580-torch211cu130.toml",
    ),
    Machine(
        "v100-h100",
        "V100 + H100 in one box, driver 570",
        "3.12",
        "570.124.06",
        (("V100", "7.0"), ("H100", "9.0")),
        "tests/data/profiles/v100-h100-torch211cu128.toml",
    ),
    Machine(
        "driver-470",
        "A100 on a 470 driver (CUDA 11.4)",
        "3.8",
        "470.82.01",
        (("A100", "8.0"),),
        "tests/data/profiles/driver470-torch21cu121.toml",
    ),
    Machine(
        "rtx5090-570",
        "RTX 5090 (Blackwell, sm_120), driver 570",
        "3.12",
        "570.133.07",
        (("RTX 5090", "12.0"),),
        "bench/profiles/rtx5090-driver570.toml",
    ),
    Machine(
        "cpu-torch-a100",
        "CPU torch already installed, A100, driver 535",
        "3.11",
        "535.104.05",
        (("A100", "8.0"),),
        None,
        installed_venv=CPU_TORCH_VENV,
        note="a real venv with torch 2.13.0+cpu; each tool is asked to install torch into it",
    ),
    Machine(
        "login-a100",
        "GPU-less login node building for A100 nodes",
        "3.11",
        None,
        (("A100 (on the compute nodes)", "8.0"),),
        "bench/profiles/login-node-for-a100.toml",
        note="the login node has no driver and no GPU; the A100s are where the torch will run",
    ),
)


# -- counting proxy ------------------------------------------------------------------------------


class CountingProxy:
    """A loopback HTTP CONNECT proxy that relays to the real host and counts what comes back."""

    def __init__(self, byte_cap: int = BYTE_CAP) -> None:
        self.byte_cap = byte_cap  # a run cut off past this many bytes: the cap is for runaways
        self.server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.server.bind(("127.0.0.1", 0))
        self.server.listen(64)
        self.port = self.server.getsockname()[1]
        self.lock = threading.Lock()
        self.reset()
        threading.Thread(target=self._serve, daemon=True).start()

    def reset(self) -> None:
        with self.lock:
            self.bytes_down = 0
            self.cut_off = False
            self.requests: list[str] = []

    def routed(self, env: dict[str, str]) -> dict[str, str]:
        """``env`` with every HTTP(S) request sent through this proxy (no host let past it)."""
        url = f"http://127.0.0.1:{self.port}"
        routed = {k: v for k, v in env.items() if k not in ("NO_PROXY", "no_proxy")}
        routed.update(HTTPS_PROXY=url, HTTP_PROXY=url, https_proxy=url, http_proxy=url)
        return routed

    def snapshot(self) -> dict[str, Any]:
        with self.lock:
            return {
                "bytes_downloaded": self.bytes_down,
                "cut_off_at_cap": self.cut_off,
                "proxy_requests": list(self.requests),
            }

    def _serve(self) -> None:
        while True:
            client, _ = self.server.accept()
            threading.Thread(target=self._handle, args=(client,), daemon=True).start()

    def _handle(self, client: socket.socket) -> None:
        try:
            head = b""
            while b"\r\n\r\n" not in head:
                chunk = client.recv(4096)
                if not chunk:
                    return
                head += chunk
            first = head.split(b"\r\n", 1)[0].decode("latin-1")
            method, target = first.split(" ")[:2]
            with self.lock:
                self.requests.append(f"{method} {target}")
            if method != "CONNECT":
                client.sendall(b"HTTP/1.1 501 Not Implemented\r\nContent-Length: 0\r\n\r\n")
                return
            host, port = target.rsplit(":", 1)
            try:
                upstream = socket.create_connection((host, int(port)), timeout=10)
            except OSError:
                client.sendall(b"HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\n\r\n")
                return
            client.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
            self._relay(client, upstream)
        except OSError:
            pass
        finally:
            client.close()

    def _relay(self, client: socket.socket, upstream: socket.socket) -> None:
        with upstream:
            while True:
                ready, _, _ = select.select([client, upstream], [], [], 60)
                if not ready:
                    return
                for sock in ready:
                    data = sock.recv(65536)
                    if not data:
                        return
                    if sock is upstream:
                        with self.lock:
                            self.bytes_down += len(data)
                            if self.bytes_down > self.byte_cap:
                                self.cut_off = True
                                return
                        client.sendall(data)
                    else:
                        upstream.sendall(data)


# -- running the tools ---------------------------------------------------------------------------


def _base_env(proxy: CountingProxy, path_prefix: str | None) -> dict[str, str]:
    env = proxy.routed(
        {k: v for k, v in os.environ.items() if not k.startswith(("UV_", "LTT_", "CUDA_RESOLVE_"))}
    )
    # No nvidia-smi from anywhere but our fake folder (there is none on this machine; be sure).
    dirs = [
        d for d in env.get("PATH", "").split(":") if d and not (Path(d) / "nvidia-smi").exists()
    ]
    env["PATH"] = ":".join(([path_prefix] if path_prefix else []) + dirs)
    return env


def _run(
    cmd: list[str], env: dict[str, str], proxy: CountingProxy, timeout: int = UV_TIMEOUT_S
) -> dict[str, Any]:
    proxy.reset()
    try:
        done = subprocess.run(
            cmd, env=env, capture_output=True, text=True, timeout=timeout, check=False
        )
        rc: int | None = done.returncode
        out, err = done.stdout, done.stderr
    except subprocess.TimeoutExpired as exc:
        rc = None
        out = exc.stdout.decode() if isinstance(exc.stdout, bytes) else (exc.stdout or "")
        err = exc.stderr.decode() if isinstance(exc.stderr, bytes) else (exc.stderr or "")
    return {"command": cmd, "rc": rc, "stdout": out, "stderr": err, **proxy.snapshot()}


def _shown(cmd: list[str], env_shown: dict[str, str]) -> str:
    prefix = " ".join(f"{k}={v}" for k, v in env_shown.items())
    text = " ".join(str(c) for c in cmd)
    for old, new in (
        (str(REPO) + "/", ""),
        (str(SBS_VENV) + "/bin/", ""),
        (str(REPO / ".venv/bin") + "/", ""),
    ):
        text = text.replace(old, new)
    return (prefix + " " + text).strip()


def _fake_nvidia_smi(folder: Path, driver: str) -> None:
    script = folder / "nvidia-smi"
    script.write_text(
        "#!/bin/sh\n"
        f'echo "$@" >> "{folder}/calls.log"\n'
        'case "$*" in *driver_version*) echo driver_version; echo '
        + driver
        + ";; *) exit 9;; esac\n"
    )
    script.chmod(0o755)


# -- the index rule, the same for all three ------------------------------------------------------


def _releases_for(index: Index, python: str, variant: str) -> list[TorchRelease]:
    found = [r for r in index.torch if python in r.python and r.variant(variant) is not None]
    return sorted(found, key=lambda r: r.version, reverse=True)


def judge(
    index: Index, version: str, variant: str, gpus: tuple[tuple[str, str], ...]
) -> dict[str, Any]:
    """Kernels for every GPU? ``compat.build_covers_gpu`` on the index's arch list of the build."""
    release = index.torch_release(version)
    build = release.variant(variant) if release else None
    if variant == "cpu":
        return {"arch_list": "", "all_gpus_covered": False, "verdict": "CPU build: no CUDA kernels"}
    if build is None or not build.arch_list:
        return {
            "arch_list": "",
            "all_gpus_covered": None,
            "verdict": "arch list unknown to the index",
        }
    missing = [
        f"{name} (sm_{cc.replace('.', '')})"
        for name, cc in gpus
        if not build_covers_gpu(build.arch_list, ComputeCapability.parse(cc))
    ]
    arch = ";".join(str(e) for e in build.arch_list)
    verdict = "kernels for every GPU" if not missing else "no kernels for " + ", ".join(missing)
    return {
        "arch_list": arch,
        "all_gpus_covered": not missing,
        "verdict": verdict,
        "arch_list_unverified": "arch_list" in build.unverified,
    }


def pick_by_order(index: Index, python: str, order: list[str]) -> tuple[str, str] | None:
    """The first variant in ``order`` the index lists for this Python, and its newest release."""
    for variant in order:
        releases = _releases_for(index, python, variant)
        if releases:
            return str(releases[0].version), variant
    return None


def _cuda_key(variant: str) -> tuple[int, int]:
    if variant == "cpu":
        return (-1, 0)
    digits = variant[2:]
    return (int(digits[:-1]), int(digits[-1]))


# -- the three tools -----------------------------------------------------------------------------


def run_cuda_resolve(m: Machine, index: Index, proxy: CountingProxy) -> dict[str, Any]:
    cli = str(REPO / ".venv/bin/cuda-resolve")
    shown_env: dict[str, str] = {}
    env = _base_env(proxy, None)
    if m.profile:
        cmd = [cli, "plan", "torch", "--profile", m.profile, "--json"]
        if m.key != "login-a100":
            # The profiles carry the torch their story started from; ask for a fresh pick.
            cmd.append("--allow-torch-change")
    else:
        assert m.installed_venv and m.driver
        shown_env = {
            "CUDA_RESOLVE_DRIVER": m.driver,
            "CUDA_RESOLVE_CUDA_ARCH": ",".join(cc for _, cc in m.gpus),
        }
        env.update(shown_env)
        cmd = [cli, "plan", "torch", "--python", str(m.installed_venv / "bin/python"), "--json"]
    first = _run(cmd, env, proxy)
    result: dict[str, Any] = {"runs": [dict(first, shown=_shown(cmd, shown_env))]}
    if first["rc"] != 0 and "--allow-torch-change" not in cmd:
        # cuda-resolve refuses to replace a torch silently; record that, then the answer it hints
        # at.
        retry = [*cmd, "--allow-torch-change"]
        second = _run(retry, env, proxy)
        result["runs"].append(dict(second, shown=_shown(retry, shown_env)))
        try:
            refusal = json.loads(first["stdout"])
            result["refused_first"] = f"{refusal['error']} (hint: {refusal['hint']})"
        except (ValueError, KeyError):
            result["refused_first"] = (first["stderr"].strip().splitlines() or [""])[0]
        final = second
    else:
        final = first
    plan = json.loads(final["stdout"])
    torch_item = next(i for i in plan["install"] if i["name"] == "torch")
    result["pick"] = f"{torch_item['version']}+{torch_item['variant']}"
    result["kernels"] = judge(index, torch_item["version"], torch_item["variant"], m.gpus)
    result["reason"] = plan["reasons"][0] if plan["reasons"] else ""
    if m.installed_venv:
        dry = [
            str(REPO / ".venv/bin/cuda-pip"),
            "install",
            "torch",
            "--dry-run",
            "--allow-torch-change",
            "--python",
            str(m.installed_venv / "bin/python"),
        ]
        run = _run(dry, env, proxy)
        result["cuda_pip_dry_run"] = dict(run, shown=_shown(dry, shown_env))
    return result


UV_GET = re.compile(
    r"(?:GET request for|Fetching|for url \()[: ]*(https://download\.pytorch\.org/whl/([a-z0-9.]+)/torch/)"
)


def run_uv(m: Machine, index: Index, proxy: CountingProxy) -> dict[str, Any]:
    uv = str(SBS_VENV / "bin/uv")
    env = _base_env(proxy, None)
    shown_env = {"UV_CUDA_DRIVER_VERSION": m.driver} if m.driver else {}
    env.update(shown_env)
    env["UV_HTTP_RETRIES"] = "0"
    # --python-version needs no interpreter of that version; keep uv from fetching one.
    env["UV_PYTHON_DOWNLOADS"] = "never"
    env["UV_NO_CACHE"] = "1"
    if m.installed_venv:
        cmd = [
            uv,
            "pip",
            "install",
            "torch",
            "--torch-backend=auto",
            "--dry-run",
            "--python",
            str(m.installed_venv / "bin/python"),
            "-v",
        ]
    else:
        req = Path(tempfile.mkdtemp(prefix="sbs-uv-")) / "requirements.in"
        req.write_text("torch\n")
        cmd = [
            uv,
            "pip",
            "compile",
            str(req),
            "--torch-backend=auto",
            "--python-version",
            m.python,
            "--python-platform",
            "x86_64-manylinux_2_28",
            "-v",
        ]
    run = _run(cmd, env, proxy)
    log = run["stdout"] + run["stderr"]
    # uv fetches its indexes concurrently, so the log's order varies from run to run; uv ranks
    # them newest CUDA first (every run's first request is the newest), which is the order used.
    order = sorted({variant for _, variant in UV_GET.findall(log)}, key=_cuda_key, reverse=True)
    detected = re.search(r"Detected CUDA driver version from `([^`]+)`: (\S+)", log)
    result: dict[str, Any] = {
        "run": dict(
            run,
            shown=_shown(cmd, shown_env).replace(
                str(req) if not m.installed_venv else "\0", "requirements.in"
            ),
        ),
        "driver_seen": f"{detected.group(2)} (from {detected.group(1)})" if detected else "none",
        "index_order": order,
        "printed": _last_lines(log, 3),
    }
    if m.installed_venv and re.search(r"Would make no changes|Audited", log):
        installed = _installed_torch(m.installed_venv)
        result["pick"] = f"{installed} (kept: already installed)"
        base, _, variant = installed.partition("+")
        result["kernels"] = judge(index, base, variant or "cpu", m.gpus)
        return result
    picked = pick_by_order(index, m.python, order)
    if picked:
        result["pick"] = f"{picked[0]}+{picked[1]}"
        result["kernels"] = judge(index, picked[0], picked[1], m.gpus)
    return result


def run_ltt(m: Machine, index: Index, proxy: CountingProxy) -> dict[str, Any]:
    venv = m.installed_venv or SBS_VENV
    fake = Path(tempfile.mkdtemp(prefix="sbs-fake-smi-"))
    if m.driver:
        _fake_nvidia_smi(fake, m.driver)
    env = _base_env(proxy, str(fake) if m.driver else None)
    env["PIP_RETRIES"] = "0"
    env["PIP_DEFAULT_TIMEOUT"] = "10"
    probe = _run(
        [
            str(venv / "bin/python"),
            "-c",
            "from light_the_torch._cb import detect_compatible_computation_backends as d;"
            "print(' '.join(sorted(str(b) for b in d())))",
        ],
        env,
        proxy,
    )
    accepted = probe["stdout"].split()
    cmd = [str(venv / "bin/ltt"), "install", "torch", "--dry-run", "-v"]
    if not m.installed_venv:
        cmd.insert(4, "--ignore-installed")
    run = _run(cmd, env, proxy, timeout=120)
    log = run["stdout"] + run["stderr"]
    calls = (fake / "calls.log").read_text().split("\n") if (fake / "calls.log").exists() else []
    shown_env = (
        {"PATH": "<folder with a fake nvidia-smi printing " + m.driver + ">:$PATH"}
        if m.driver
        else {}
    )
    result: dict[str, Any] = {
        "run": dict(run, shown=_shown(cmd, shown_env).replace(str(venv) + "/bin/", "")),
        "nvidia_smi_calls": [c for c in calls if c],
        "accepted_backends": accepted,
        "printed": _last_lines(log, 3),
    }
    if m.installed_venv and "Requirement already satisfied: torch" in log:
        installed = _installed_torch(m.installed_venv)
        result["pick"] = f"{installed} (kept: already installed)"
        base, _, variant = installed.partition("+")
        result["kernels"] = judge(index, base, variant or "cpu", m.gpus)
        shutil.rmtree(fake, ignore_errors=True)
        return result
    # ltt's sort key is (computation backend, version): the highest backend wins, then the newest.
    order = sorted(
        (b for b in accepted if b == "cpu" or b.startswith("cu")), key=_cuda_key, reverse=True
    )
    picked = pick_by_order(index, m.python, order)
    if picked:
        result["pick"] = f"{picked[0]}+{picked[1]}"
        result["kernels"] = judge(index, picked[0], picked[1], m.gpus)
    shutil.rmtree(fake, ignore_errors=True)
    return result


def _installed_torch(venv: Path) -> str:
    out = subprocess.run(
        [
            str(venv / "bin/python"),
            "-c",
            "import importlib.metadata as m; print(m.version('torch'))",
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    return out.stdout.strip()


def _last_lines(text: str, n: int) -> list[str]:
    lines = [
        ln.strip()
        for ln in text.splitlines()
        if ln.strip() and not ln.startswith(("DEBUG", "TRACE"))
    ]
    return lines[-n:]


def _version(cmd: list[str]) -> str:
    return (
        subprocess.run(cmd, capture_output=True, text=True, check=False)
        .stdout.strip()
        .splitlines()[0]
    )


# -- report --------------------------------------------------------------------------------------


def _cell(tool: dict[str, Any]) -> str:
    pick = tool.get("pick", "no decision")
    kernels = tool.get("kernels", {})
    mark = (
        {True: "yes", False: "**no**", None: "unknown"}[kernels.get("all_gpus_covered")]
        if kernels
        else "-"
    )
    prefix = (
        "refuses to replace the CPU torch silently; with `--allow-torch-change`: "
        if "refused_first" in tool
        else ""
    )
    return f"{prefix}{pick}; kernels for all GPUs: {mark}"


def markdown(doc: dict[str, Any]) -> str:
    lines = [
        f"# Side by side: which torch build each tool picks ({DATE})",
        "",
        f"Tools: {doc['versions']['cuda-resolve']}; {doc['versions']['uv']}; "
        f"light-the-torch {doc['versions']['light-the-torch']} (pip {doc['versions']['ltt-pip']}). "
        "Produced by `.venv/bin/python bench/side_by_side.py`; raw output in "
        f"`side-by-side-{DATE}.json`.",
        "",
        "The PyTorch index cannot be reached from this machine: this compares decisions, "
        "not installs. "
        "uv's pick is the newest-CUDA index among those its debug log shows it querying (uv ranks "
        "them newest first and its default strategy takes the first index that has torch) and the "
        "newest torch the cuda-resolve index lists there; ltt's pick is "
        "the highest backend among those its own detection accepts, then the newest torch. "
        '"Kernels for all GPUs" applies one rule to every pick: the build\'s arch list in the '
        "cuda-resolve index, checked with `compat.build_covers_gpu`.",
        "",
        "| Machine | cuda-resolve | uv `--torch-backend=auto` | light-the-torch |",
        "|---|---|---|---|",
    ]
    for row in doc["machines"]:
        lines.append(
            f"| {row['title']} | {_cell(row['cuda_resolve'])} | {_cell(row['uv'])} | "
            f"{_cell(row['ltt'])} |"
        )
    lines += ["", "## What each tool saw and printed", ""]
    for row in doc["machines"]:
        cr, uv, ltt = row["cuda_resolve"], row["uv"], row["ltt"]
        lines.append(f"### {row['title']}")
        if row["note"]:
            lines.append(f"_{row['note']}_")
        lines.append("")
        for run in cr["runs"]:
            lines.append(f"- cuda-resolve: `{run['shown']}` (exit {run['rc']})")
        if "refused_first" in cr:
            lines.append(f"  - first run refused: {cr['refused_first']}")
        lines.append(f"  - picks {cr['pick']}: {cr['kernels']['verdict']}")
        lines.append(
            f"- uv: `{uv['run']['shown']}` (exit {uv['run']['rc']}); driver seen: "
            f"{uv['driver_seen']}; PyTorch indexes queried, newest CUDA first: "
            f"{', '.join(uv['index_order']) or 'none'}"
        )
        lines.append("  - printed: " + " / ".join(f"`{p[:160]}`" for p in uv["printed"]))
        lines.append(
            f"  - pick {uv.get('pick', 'none')}: {uv.get('kernels', {}).get('verdict', '-')}"
        )
        lines.append(
            f"- ltt: `{ltt['run']['shown']}` (exit {ltt['run']['rc']}); nvidia-smi calls: "
            f"{ltt['nvidia_smi_calls'] or 'none'}; accepted backends: "
            f"{' '.join(ltt['accepted_backends'])}"
        )
        lines.append("  - printed: " + " / ".join(f"`{p[:160]}`" for p in ltt["printed"]))
        lines.append(
            f"  - pick {ltt.get('pick', 'none')}: {ltt.get('kernels', {}).get('verdict', '-')}"
        )
        lines.append("")
    lines += [
        "## Notes",
        "",
        "- uv's `--torch-backend=auto` reads only the driver version (here from "
        "`UV_CUDA_DRIVER_VERSION`; the debug log says so); no GPU fact reaches its choice, so a "
        "Pascal card or a V100 next to an H100 gets the newest CUDA index the driver allows. With "
        "no driver it uses the CPU index.",
        "- light-the-torch reads only `nvidia-smi --query-gpu=driver_version` (the fake script "
        "logged every call; `accepted backends` is ltt's own "
        "`detect_compatible_computation_backends()`). Its real run always uses the scratch venv's "
        "Python 3.11; the modelled pick uses each machine's Python.",
        "- With download.pytorch.org unreachable ltt falls back to PyPI for torch and its dry run "
        "fetches whole torch wheels: without the bench's byte cap one run downloaded 6.7 GB and "
        "filled this machine's disk. The sha256 lines it printed come from the bench cutting that "
        "download off.",
        "- Installed CPU torch: uv and ltt see `torch` already satisfied and change nothing; "
        "cuda-resolve refuses until told `--allow-torch-change`, then picks a CUDA build.",
        "- Login node: uv and ltt can only see the login node itself (no driver), so they pick a "
        "CPU build; cuda-resolve is given the nodes' GPU class in a profile and states the driver "
        "the nodes need for the CUDA build it picks.",
        "- Builds whose existence or arch list the cuda-resolve index marks unverified are "
        "flagged in the JSON (`arch_list_unverified`; cuda-resolve itself prefers confirmed "
        "releases, which is why it can pick an older version than the modelled uv/ltt picks).",
        "",
    ]
    lines += [
        "## Bytes downloaded with the PyTorch index unreachable",
        "",
        "Every command ran with HTTPS_PROXY/HTTP_PROXY set to a loopback CONNECT proxy that relays "
        "to the real host and counts the bytes coming back (a refused or unresolvable host is "
        f"counted as a request with 0 bytes); it cuts a run off after {BYTE_CAP:,} bytes.",
        "",
        "| Command | Exit | Proxy requests | Bytes downloaded |",
        "|---|---|---|---|",
    ]
    for entry in doc["bytes"]:
        reqs = ", ".join(sorted(set(entry["proxy_requests"]))) or "none"
        size = f"{entry['bytes_downloaded']:,}"
        if entry.get("cut_off_at_cap"):
            size = f"> {BYTE_CAP:,} (cut off by the bench)"
        lines.append(f"| `{entry['shown']}` | {entry['rc']} | {reqs} | {size} |")
    return "\n".join(lines) + "\n"


def main() -> int:
    for needed in (SBS_VENV / "bin/uv", SBS_VENV / "bin/ltt", CPU_TORCH_VENV / "bin/ltt"):
        if not needed.exists():
            print(
                f"missing {needed}: see this script's docstring for the scratch venvs",
                file=sys.stderr,
            )
            return 2
    os.chdir(REPO)
    index = default_index()
    proxy = CountingProxy()
    versions = {
        "cuda-resolve": _version([str(REPO / ".venv/bin/cuda-resolve"), "--version"]),
        "uv": _version([str(SBS_VENV / "bin/uv"), "--version"]),
        "light-the-torch": _version(
            [
                str(SBS_VENV / "bin/python"),
                "-c",
                "import light_the_torch as l; print(l.__version__)",
            ]
        ),
        "ltt-pip": _version(
            [str(SBS_VENV / "bin/python"), "-c", "import pip; print(pip.__version__)"]
        ),
    }
    rows = []
    byte_rows = []
    for m in MACHINES:
        print(f"{m.key}: cuda-resolve", file=sys.stderr)
        cr = run_cuda_resolve(m, index, proxy)
        print(f"{m.key}: uv", file=sys.stderr)
        uv = run_uv(m, index, proxy)
        print(f"{m.key}: ltt", file=sys.stderr)
        ltt = run_ltt(m, index, proxy)
        rows.append(
            {
                "key": m.key,
                "title": m.title,
                "note": m.note,
                "python": m.python,
                "driver": m.driver,
                "gpus": [{"name": n, "compute_capability": c} for n, c in m.gpus],
                "cuda_resolve": cr,
                "uv": uv,
                "ltt": ltt,
            }
        )
        for run in (
            cr["runs"]
            + ([cr["cuda_pip_dry_run"]] if "cuda_pip_dry_run" in cr else [])
            + [uv["run"], ltt["run"]]
        ):
            byte_rows.append(
                {
                    k: run[k]
                    for k in ("shown", "rc", "proxy_requests", "bytes_downloaded", "cut_off_at_cap")
                }
            )
    doc = {"date": DATE, "versions": versions, "machines": rows, "bytes": byte_rows}
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / f"side-by-side-{DATE}.json").write_text(json.dumps(doc, indent=2) + "\n")
    (RESULTS / f"side-by-side-{DATE}.md").write_text(markdown(doc))
    print(markdown(doc))
    return 0


if __name__ == "__main__":
    sys.exit(main())
