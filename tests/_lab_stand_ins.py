"""A lab's servers on loopback, for the README's lockfile block (tests/test_readme_blocks.py).

- The lab's mirror of PyPI and of the PyTorch index: one HTTPS server (``StaticIndex``: PEP 503
  pages and PEP 691 JSON under ``simple/``, PyTorch's ``whl/VARIANT/`` tree) serving small
  wheels: the torch each profile's plan picks (a stand-in like ``_torch_env.standin_torch_wheel``:
  ``torch/__init__.py`` and ``torch/version.py`` with its CUDA), which requires a CUDA runtime
  wheel served from the PyPI side only, as torch's ``nvidia-*`` wheels are. The tool is pointed at
  it the way a lab does it, ``cuda-resolve mirror set custom --pypi URL --pytorch URL``.
- The lab's wheelhouse (``CUDA_RESOLVE_WHEELHOUSE``, ``nfs/lab/wheelhouse`` in the test's
  folder), served by a static HTTPS server at ``/wheelhouse``, holding pointnet2_ops built for
  each profile's torch beforehand (a stand-in wheel at the key the lock's plan computes, put in
  with ``Wheelhouse.publish`` as a build does: nvcc is not run).
- One test CA signs both servers and is the trust store (``SSL_CERT_FILE``); every other host is
  unreachable (``https_proxy`` names a closed port, ``no_proxy`` is loopback), and pip's variables
  of the machine running the tests are not the lab's (removed).
"""

from __future__ import annotations

import http.server
import ssl
import subprocess
import sys
import threading
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import trustme
from test_lock_support import StaticIndex, _Handler, make_wheel

__all__ = ["Lab", "lab_servers"]

#: The placeholder host of the README's served wheelhouse.
WHEELHOUSE_PLACEHOLDER = "https://wheels.lab.example/"


@dataclass
class Lab:
    folder: Path
    index: StaticIndex
    index_url: str  # the mirror's root: simple/ and whl/ below it
    wheelhouse: Path
    served_url: str  # the root of the folder the wheelhouse is in, ends with "/"
    ca_file: Path

    def environ(self, base: Mapping[str, str]) -> dict[str, str]:
        """``base`` as it is on a lab machine: the lab's CA trusted, its wheelhouse, no other
        host reachable, none of this machine's pip variables."""
        environ = {
            name: value
            for name, value in base.items()
            if not name.startswith("PIP_") and name.lower() not in ("https_proxy", "http_proxy")
        }
        environ.update(
            SSL_CERT_FILE=str(self.ca_file),
            CUDA_RESOLVE_WHEELHOUSE=str(self.wheelhouse),
            https_proxy="http://127.0.0.1:9",
            http_proxy="http://127.0.0.1:9",
            no_proxy="127.0.0.1",
        )
        return environ

    def configure(self, environ: Mapping[str, str]) -> None:
        """The lab's mirror, set as a user sets one (pip.conf and cuda-resolve's config)."""
        done = subprocess.run(
            [
                str(Path(sys.executable).parent / "cuda-resolve"),
                "mirror",
                "set",
                "custom",
                "--pypi",
                f"{self.index_url}/simple/",
                "--pytorch",
                f"{self.index_url}/whl/",
            ],
            cwd=self.folder,
            env=dict(environ),
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert done.returncode == 0, done.stdout + done.stderr

    def stock(self, profiles: Sequence[Path], requests: Sequence[str]) -> None:
        """The wheels each profile's lock needs: its torch on the mirror, its source builds in the
        wheelhouse (at the keys the lock's plan computes, with the lab's config)."""
        from cuda_resolve.config import load_config
        from cuda_resolve.index import default_index
        from cuda_resolve.lock.make import profile_plan
        from cuda_resolve.lock.profiles import load_lock_profile
        from cuda_resolve.plan import PYPI_SIMPLE
        from cuda_resolve.resolve import Options
        from cuda_resolve.wheelhouse.store import Wheelhouse

        config = load_config(self.folder / ".config" / "cuda-resolve" / "config.toml")
        house = Wheelhouse(self.wheelhouse)
        built = self.folder / "built"
        for path in profiles:
            plan, _ = profile_plan(
                load_lock_profile(str(path)), requests, default_index(), Options(), config, house
            )
            for item in plan.items:
                if item.name == "torch" and item.kind == "wheel":
                    variant = item.variant or ""
                    cuda = f"{variant[2:-1]}.{variant[-1]}" if variant.startswith("cu") else None
                    local = item.index != PYPI_SIMPLE and item.variant is not None
                    version = f"{item.version}+{item.variant}" if local else item.version
                    runtime = f"nvidia-cuda-runtime=={cuda}.0" if cuda else None
                    if runtime:
                        self.index.add(make_wheel(built, "nvidia-cuda-runtime", f"{cuda}.0"))
                    wheel = make_wheel(
                        built / "torch",
                        "torch",
                        version,
                        requires=[runtime] if runtime else [],
                        files={
                            "torch/__init__.py": f"__version__ = {version!r}\n"
                            "from . import version\n",
                            "torch/version.py": f"__version__ = {version!r}\ncuda = {cuda!r}\n",
                        },
                    )
                    self.index.add(wheel, variant=item.variant if local else None)
            for build in plan.builds:
                key = build.key
                tag = f"{key.python_tag}-{key.python_tag}-{key.platform}"
                wheel = make_wheel(
                    built / key.digest,
                    key.package,
                    key.labelled_version,
                    requires=["torch"],
                    tag=tag,
                    files={f"{key.package}/__init__.py": "import torch\n"},
                )
                house.publish(key, wheel, strip_debug=False)


@contextmanager
def _serve_tls(root: Path, ca: trustme.CA) -> Iterator[str]:
    server = http.server.ThreadingHTTPServer(
        ("127.0.0.1", 0), partial(_Handler, directory=str(root))
    )
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("127.0.0.1").configure_cert(context)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"https://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


@contextmanager
def lab_servers(folder: Path) -> Iterator[Lab]:
    """The lab's mirror and served wheelhouse, running until the block is done."""
    ca = trustme.CA(organization_name="Lab Test CA")
    ca_file = folder / "lab-ca.pem"
    ca.cert_pem.write_to_path(str(ca_file))
    index = StaticIndex(folder / "lab-mirror")
    index.root.mkdir()
    served = folder / "nfs" / "lab"
    (served / "wheelhouse").mkdir(parents=True)
    with _serve_tls(index.root, ca) as index_url, _serve_tls(served, ca) as served_url:
        index.url = index_url
        yield Lab(
            folder=folder,
            index=index,
            index_url=index_url,
            wheelhouse=served / "wheelhouse",
            served_url=f"{served_url}/",
            ca_file=ca_file,
        )
