"""What a bare environment (a Slurm job under ``--export=NONE``, a Jupyter kernel) must be told
for the target environment's extensions to import and its later builds to pick the right
toolkit, and that text for each shell.

The seeds' commonest failure: ``import pointnet2_ops`` works in the terminal and fails in a job
with ``libcudart.so.12: cannot open shared object file``, because the terminal's
LD_LIBRARY_PATH never reached the job. The exports come from the extension scan ``doctor`` uses,
run as the loader would see a bare environment (no LD_LIBRARY_PATH): only libraries an
extension needs and the loader would not find get a directory, the one where this terminal's
LD_LIBRARY_PATH or a detected toolkit holds them.

:func:`job_environment` is pure; :func:`bare_extension_scan` and :func:`library_locations`
are the probes it takes its facts from. Every rendering is idempotent: evaluating it twice
leaves the environment as evaluating it once did.
"""

from __future__ import annotations

import os
import re
import shlex
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Literal

from ._frozen import frozen
from .environment import Environment, ExtensionBinary
from .errors import UsageError

__all__ = [
    "SHELLS",
    "JobEnvironment",
    "bare_extension_scan",
    "csh_quote",
    "fish_quote",
    "job_environment",
    "kernel_spec",
    "library_locations",
    "render",
    "slurm_lines",
    "validate_kernel_name",
]

Shell = Literal["bash", "zsh", "fish", "csh", "tcsh"]
SHELLS: tuple[Shell, ...] = ("bash", "zsh", "fish", "csh", "tcsh")  # csh and tcsh: one rendering
_KERNEL_NAME = re.compile(r"^[A-Za-z0-9._-]+$")  # what jupyter_client accepts as a kernel name


@frozen
class JobEnvironment:
    """The variables the target environment needs, as values to prepend or set."""

    cuda_home: str | None = None
    path: tuple[str, ...] = ()  # directories to put first on PATH (the toolkit's bin)
    library_path: tuple[str, ...] = ()  # directories to put first on LD_LIBRARY_PATH
    arch_list: str | None = None  # TORCH_CUDA_ARCH_LIST for later builds
    needs: tuple[
        tuple[str, str, str], ...
    ] = ()  # (extension, soname, directory) that explain library_path
    unresolved: tuple[tuple[str, str], ...] = ()  # (extension, soname) found in no known directory
    notes: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {
            "CUDA_HOME": self.cuda_home,
            "PATH": list(self.path),
            "LD_LIBRARY_PATH": list(self.library_path),
            "TORCH_CUDA_ARCH_LIST": self.arch_list,
            "needs": [{"extension": e, "library": s, "directory": d} for e, s, d in self.needs],
            "unresolved": [{"extension": e, "library": s} for e, s in self.unresolved],
            "notes": list(self.notes),
        }


def bare_extension_scan(env: Environment) -> tuple[ExtensionBinary, ...]:
    """The doctor's extension scan of the target, as the loader sees it with no LD_LIBRARY_PATH."""
    from .detect.extensions import find_extensions

    torch_sites = (
        (os.path.dirname(env.torch.location),)
        if env.torch is not None and env.torch.location
        else ()
    )
    return find_extensions(
        env.python.site_packages, torch_sites=torch_sites, environ={"PATH": os.defpath}
    )


def _toolkit_library_dirs(env: Environment) -> list[str]:
    dirs: list[str] = []
    for toolkit in env.toolkits:
        if toolkit.root:
            root = toolkit.root.rstrip("/")
            dirs += [f"{root}/lib64", f"{root}/lib", f"{root}/targets/{env.machine.arch}-linux/lib"]
    return dirs


def library_locations(
    env: Environment, sonames: Iterable[str], environ: Mapping[str, str]
) -> dict[str, str]:
    """Where each soname lies: the first of this terminal's LD_LIBRARY_PATH entries, then the
    detected toolkits' library folders, that holds it. Sonames found nowhere are left out."""
    candidates = [
        p for p in environ.get("LD_LIBRARY_PATH", "").split(":") if p
    ] + _toolkit_library_dirs(env)
    found: dict[str, str] = {}
    for soname in sonames:
        for directory in candidates:
            if os.path.exists(os.path.join(directory, soname)):
                found[soname] = os.path.normpath(directory)
                break
    return found


def _arch_list(env: Environment) -> tuple[str | None, str | None]:
    from .compat import arch_list_for_build, format_arch_list

    capabilities = env.capabilities
    if not capabilities:
        return (
            None,
            "no GPU detected here: TORCH_CUDA_ARCH_LIST is left to the build (cuda-resolve build "
            "sets it per profile)",
        )
    toolkit = env.primary_toolkit
    if toolkit is None or not toolkit.gpu_archs:
        return ";".join(
            str(c) for c in sorted(set(capabilities), key=lambda c: (c.major, c.minor))
        ), None
    entries, impossible = arch_list_for_build(capabilities, toolkit.gpu_archs)
    note = (
        f"nvcc {toolkit.version} has no target for {', '.join(map(str, impossible))}"
        if impossible
        else None
    )
    return (format_arch_list(entries) or None), note


def job_environment(
    env: Environment, scan: Sequence[ExtensionBinary], locations: Mapping[str, str]
) -> JobEnvironment:
    """The exports for ``env`` from a bare-environment ``scan`` and where the missing libraries
    lie (see :func:`library_locations`)."""
    toolkit = env.primary_toolkit
    notes: list[str] = []
    root = toolkit.root.rstrip("/") if toolkit is not None and toolkit.root else None
    if root is None:
        notes.append("no CUDA toolkit found: CUDA_HOME and PATH are left as they are")
    needs: list[tuple[str, str, str]] = []
    unresolved: list[tuple[str, str]] = []
    for ext in scan:
        for soname in ext.missing:
            if soname in locations:
                needs.append((ext.path, soname, locations[soname]))
            else:
                unresolved.append((ext.path, soname))
    for path, soname in unresolved:
        notes.append(
            f"{path} needs {soname}, which is in no LD_LIBRARY_PATH entry here nor in a detected "
            "toolkit: rebuild it against the installed torch"
        )
    arch_list, arch_note = _arch_list(env)
    if arch_note:
        notes.append(arch_note)
    return JobEnvironment(
        cuda_home=root,
        path=(f"{root}/bin",) if root else (),
        library_path=tuple(dict.fromkeys(directory for _, _, directory in needs)),
        arch_list=arch_list,
        needs=tuple(needs),
        unresolved=tuple(unresolved),
        notes=tuple(notes),
    )


def _prepend_posix(name: str, dirs: Sequence[str]) -> str:
    """Put ``dirs`` first unless they already are: a second evaluation finds them there."""
    prefix = ":".join(dirs)
    quoted = shlex.quote(prefix)  # single quotes: every byte but ' itself is literal there
    return (
        f'case "${{{name}-}}" in {quoted}|{quoted}:*) ;; '
        f'*) {name}={quoted}"${{{name}:+:${name}}}" ;; esac; export {name}'
    )


def fish_quote(value: str) -> str:
    """``value`` as one fish word, exactly: in fish's single quotes only ``\\`` and ``\'`` are
    escapes; nothing is expanded (no ``$HOME``, no ``$(...)``), a newline stays a newline."""
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _prepend_fish(name: str, dirs: Sequence[str]) -> str:
    # fish keeps PATH-like variables as lists: compare the first entries with ours, one by one
    # ("x" first: test never reads a value such as "-n" or "!" as an operator).
    same = "".join(
        f'; and test "x${name}[{i + 1}]" = {fish_quote("x" + d)}' for i, d in enumerate(dirs)
    )
    items = " ".join(fish_quote(d) for d in dirs)
    # Unset or empty: ours alone (an empty entry would be the current folder).
    return (
        f'if set -q {name}[{len(dirs)}]{same}; else if test -z "${name}"; '
        f"set -gx {name} {items}; else; set -gx {name} {items} ${name}; end"
    )


def csh_quote(value: str) -> str:
    """``value`` as one csh/tcsh word, exactly. In single quotes csh expands nothing but history
    (``!``, even in a script): each ``!`` is written ``\\!`` outside the quotes. A newline cannot
    survive the documented ``eval "`...`"`` (it splits the output into words): refused."""
    if "\n" in value:
        raise UsageError(
            f"{value!r} holds a newline, which csh and tcsh cannot be given exactly through "
            'eval "`cuda-resolve env --shell csh`"',
            hint="use --shell bash, zsh or fish, or move the folder to a path without a newline",
        )
    return "'" + value.replace("'", "'\\''").replace("!", "'\\!'") + "'"


def _csh_pattern(value: str) -> str:
    """A csh ``=~`` pattern that matches ``value`` itself: quoting does not make ``*``, ``?``,
    ``[`` and ``\\`` literal in a pattern, a one-character class does."""
    return csh_quote("".join(f"[{c}]" if c in "*?[\\" else c for c in value))


def _prepend_csh(name: str, dirs: Sequence[str]) -> str:
    prefix = ":".join(dirs)
    quoted = csh_quote(prefix)
    pattern = _csh_pattern(prefix)
    # csh cannot evaluate multi-line blocks: one-line ifs, in an order where each sees the last.
    return (
        f"if ( ! $?{name} ) setenv {name} {quoted}\n"
        f'if ( "${name}" == "" ) setenv {name} {quoted}\n'
        f'if ( "${name}" != {quoted} && "${name}" !~ {pattern}:* ) '
        f'setenv {name} {quoted}:"${name}"'
    )


def _set(shell: Shell, name: str, value: str) -> str:
    if shell == "fish":
        return f"set -gx {name} {fish_quote(value)}"
    if shell in ("csh", "tcsh"):
        return f"setenv {name} {csh_quote(value)}"
    return f"export {name}={shlex.quote(value)}"


def _entries(name: str, dirs: Sequence[str]) -> tuple[str, ...]:
    """``dirs`` as entries of the ':'-separated ``name``; a folder whose path holds ':' cannot be
    one (it would become two entries): refused, naming it."""
    for directory in dirs:
        if ":" in directory:
            raise UsageError(
                f"{directory!r} cannot be put on {name}: ':' separates its entries",
                hint="move the environment or toolkit to a path without ':'",
            )
    return tuple(dirs)


def render(job: JobEnvironment, shell: Shell, *, extra_path: Sequence[str] = ()) -> str:
    """The lines to ``eval`` in ``shell``; ``extra_path`` goes first on PATH after the toolkit.
    Every value is quoted for ``shell``'s own rules and arrives byte for byte."""
    csh = shell in ("csh", "tcsh")
    prepend = _prepend_csh if csh else _prepend_fish if shell == "fish" else _prepend_posix
    lines: list[str] = []
    if job.cuda_home:
        lines.append(_set(shell, "CUDA_HOME", job.cuda_home))
    path = _entries("PATH", tuple(dict.fromkeys((*job.path, *extra_path))))
    if path:
        lines.append(prepend("PATH", path))
    if job.library_path:
        lines.append(prepend("LD_LIBRARY_PATH", _entries("LD_LIBRARY_PATH", job.library_path)))
    if job.arch_list:
        lines.append(_set(shell, "TORCH_CUDA_ARCH_LIST", job.arch_list))
    if csh:
        # `eval "`cuda-resolve env --shell csh`"` joins the lines into one: each ends its statement.
        lines = [f"{statement};" for line in lines for statement in line.split("\n")]
    return "\n".join(lines) + ("\n" if lines else "")


def slurm_lines(job: JobEnvironment, python: str) -> str:
    """Lines for an sbatch script (bash): the exports, and the target's interpreter folder first
    on PATH so ``python`` there is the target even when the job starts from a bare environment.
    The comment names the interpreter on one line (control characters escaped): a newline of its
    path must not end the comment and run the rest."""
    from ._printable import printable

    shown = printable(python, one_line=True)
    header = f"# cuda-resolve env --slurm: the environment {shown} needs (safe to evaluate twice)\n"
    return header + render(job, "bash", extra_path=(os.path.dirname(python),))


def validate_kernel_name(name: str) -> str:
    if not _KERNEL_NAME.match(name):
        raise UsageError(
            f"--jupyter {name!r}: a kernel name may hold only letters, digits, '.', '_' and '-'",
            hint="for example --jupyter pointnet-cu130",
        )
    return name


def kernel_spec(job: JobEnvironment, name: str, python: str) -> dict[str, Any]:
    """jupyter_client's kernel.json for ``python`` with the exports in ``env``. jupyter_client
    replaces ``${VAR}`` in those values with the server's own (``string.Template``), so PATH
    keeps what it had; a ``$`` of a path is written ``$$``, which it turns back into ``$``."""
    env: dict[str, str] = {}
    if job.cuda_home:
        env["CUDA_HOME"] = _template_literal(job.cuda_home)
    path = tuple(dict.fromkeys((*job.path, os.path.dirname(python))))
    env["PATH"] = ":".join((*map(_template_literal, path), "${PATH}"))
    if job.library_path:
        env["LD_LIBRARY_PATH"] = ":".join(
            (*map(_template_literal, job.library_path), "${LD_LIBRARY_PATH}")
        )
    if job.arch_list:
        env["TORCH_CUDA_ARCH_LIST"] = _template_literal(job.arch_list)
    return {
        "argv": [python, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": f"{name} (cuda-resolve)",
        "language": "python",
        "env": env,
        "metadata": {"cuda_resolve": {"python": python}},
    }


def _template_literal(value: str) -> str:
    return value.replace("$", "$$")


def jupyter_data_dir(environ: Mapping[str, str]) -> str:
    """Where jupyter looks for user kernel specs: JUPYTER_DATA_DIR, else the platform default."""
    if environ.get("JUPYTER_DATA_DIR"):
        return environ["JUPYTER_DATA_DIR"]
    home = environ.get("HOME") or os.path.expanduser("~")
    if os.uname().sysname == "Darwin":
        return os.path.join(home, "Library", "Jupyter")
    return os.path.join(
        environ.get("XDG_DATA_HOME") or os.path.join(home, ".local", "share"), "jupyter"
    )
