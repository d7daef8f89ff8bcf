"""URLs the index puts into a plan are https, and URL patterns are checked whole (issue 8)."""

from __future__ import annotations

import time

import pytest

from cuda_resolve.errors import IndexDataError
from cuda_resolve.index.urls import expand_pattern, pattern_problem, repository_problem, url_problem


@pytest.mark.parametrize(
    "pattern",
    [
        "https://example.org/torch-{torch:>200000000}.html",
        "https://example.org/torch-{torch!r}.html",
        "https://example.org/kaolin-{version:Z}.whl",
        "https://example.org/torch-{torch.__class__}.html",
        "https://example.org/torch-{torch[0]}.html",
    ],
)
def test_expand_pattern_refuses_what_the_loader_refuses_even_for_an_index_built_in_memory(
    pattern: str,
) -> None:
    started = time.monotonic()
    with pytest.raises(IndexDataError) as info:
        expand_pattern(
            pattern,
            torch="2.5.1",
            variant="cu124",
            python="3.12",
            version="0.17.0",
            platform="linux_x86_64",
        )
    assert pattern in info.value.message
    assert time.monotonic() - started < 0.5  # refused, not expanded to 200 MB


def test_expand_pattern_refuses_a_plain_http_result() -> None:
    with pytest.raises(IndexDataError, match="plain http"):
        expand_pattern("http://example.org/torch-{torch}.html", torch="2.5.1", variant="cpu")
    assert expand_pattern(
        "http://127.0.0.1:8080/torch-{torch}.html", torch="2.5.1", variant="cpu"
    ) == ("http://127.0.0.1:8080/torch-2.5.1.html")


@pytest.mark.parametrize(
    ("url", "ok"),
    [
        ("https://download.pytorch.org/whl/cu124", True),
        ("http://localhost:8000/simple/", True),
        ("http://[::1]:8000/simple/", True),
        ("http://download.pytorch.org/whl/cu124", False),
        ("ftp://example.org/x.whl", False),
        ("file:///tmp/x.whl", False),
        ("https:///nohost", False),
        ("https://example.org:99999/", False),
        ("https://example.org/a b", False),
    ],
)
def test_url_problem(url: str, ok: bool) -> None:
    assert (url_problem(url) is None) == ok


def test_pattern_problem_accepts_the_shipped_patterns() -> None:
    fields = {"torch", "cuda_nodot", "version", "python_tag", "abi_tag", "platform"}
    assert (
        pattern_problem(
            "https://nvidia-kaolin.s3.us-east-2.amazonaws.com/torch-{torch}_cu{cuda_nodot}.html",
            fields,
        )
        is None
    )
    assert pattern_problem("https://example.org/{{literal}}/{torch}.html", fields) is None


def test_repository_problem() -> None:
    assert repository_problem("git://github.com/example/demo") is not None
    assert repository_problem("http://git.example.org/demo") is not None
    for fine in (
        "https://github.com/example/demo",
        "ssh://git@host/demo",
        "git@github.com:example/demo",
        "file:///srv/git/demo",
        "http://127.0.0.1:9418/demo",
    ):
        assert repository_problem(fine) is None, fine
