"""Every import points down (DESIGN.md, "Where the acting layers go"): nothing in the library
imports the command line, which only parses arguments and renders results."""

from __future__ import annotations

import ast
from pathlib import Path

import cuda_resolve

PACKAGE = Path(cuda_resolve.__file__).parent


def _imported(path: Path) -> list[tuple[int, str]]:
    """(line, absolute module) of each import in ``path``, relative ones resolved."""
    module = ".".join(("cuda_resolve", *path.relative_to(PACKAGE).with_suffix("").parts))
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = package.split(".")
            if node.level:
                base = base[: len(base) - node.level + 1]
                name = ".".join([*base, node.module] if node.module else base)
            else:
                name = node.module or ""
            found.append((node.lineno, name))
            found += [(node.lineno, f"{name}.{alias.name}") for alias in node.names]
    return found


def test_nothing_below_the_command_line_imports_it() -> None:
    wrong = [
        f"{path.relative_to(PACKAGE)}:{line} imports {name}"
        for path in sorted(PACKAGE.rglob("*.py"))
        if path.relative_to(PACKAGE).parts[0] not in ("cli", "__main__.py")  # entry points
        for line, name in _imported(path)
        if name == "cuda_resolve.cli" or name.startswith("cuda_resolve.cli.")
    ]
    assert wrong == []


def test_the_resolver_of_relative_imports_is_right() -> None:
    """The check above sees the import it exists for (else it could pass by seeing nothing)."""
    names = {name for _, name in _imported(PACKAGE / "cli" / "sync.py")}
    assert "cuda_resolve.cli._output" in names and "cuda_resolve.lock.sync.sync" in names
