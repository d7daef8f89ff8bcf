"""Hints name a document the user can open (user walk C10): the copy installed with cuda-resolve
(``cuda_resolve/docs``, shipped from docs/*.md: tests/test_wheel_contents.py), or the checkout's
docs/ when run from one, never a bare ``docs/NAME`` that an installed tool's user does not have.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from cuda_resolve import _docs
from cuda_resolve._docs import doc_path
from cuda_resolve.errors import CudaResolveError

CHECKOUT_DOCS = Path(__file__).resolve().parent.parent / "docs"


def test_a_checkout_names_its_own_docs_folder() -> None:
    found = Path(doc_path("index-format.md"))
    assert found.is_absolute() and found.is_file() and found.parent == CHECKOUT_DOCS


def test_an_installed_copy_wins_and_a_missing_document_keeps_the_projects_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    package = tmp_path / "site-packages" / "cuda_resolve"
    (package / "docs").mkdir(parents=True)
    (package / "docs" / "mirrors.md").write_text("# mirrors\n")
    monkeypatch.setattr(_docs, "_PACKAGE", package)
    assert doc_path("mirrors.md") == str(package / "docs" / "mirrors.md")
    assert doc_path("nowhere.md") == "docs/nowhere.md"


def test_an_index_error_names_the_format_document_where_it_is(tmp_path: Path) -> None:
    from cuda_resolve.index.load import load_index

    broken = tmp_path / "index"
    (broken / "packages").mkdir(parents=True)
    (broken / "packages" / "bad.toml").write_text("format = [\n")
    with pytest.raises(CudaResolveError) as raised:
        load_index([broken])
    hint = raised.value.hint or ""
    assert f"see {CHECKOUT_DOCS / 'index-format.md'};" in hint, hint
