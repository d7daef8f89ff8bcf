"""Concurrent first use (issue 25, item 7): any number of processes may create and use a new
wheelhouse, cache or journal folder at once, and each succeeds.

A Slurm array's first tasks on a new shared folder are the case: each test starts real processes
(multiprocessing, spawned) that wait on one barrier, then use a folder that does not exist yet,
nor its parents. A process that waits for another's work waits for the event (an entry to appear,
a failure to be reported), never for a time; the only clocks are generous overall limits.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import subprocess
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from multiprocessing.synchronize import Barrier, Event
from pathlib import Path
from typing import Any

import pytest
from test_wheelhouse import make_key, make_wheel

#: Processes started together in each test (more than the two cores CI has).
PROCESSES = 4
#: Fresh folders each group of processes uses in turn (the wheelhouse race is narrow).
ROUNDS = 4
#: Overall limits, for a machine busy with other work: only a hang comes near them.
BARRIER_S = 300.0
TOTAL_S = 600.0

_Worker = Callable[..., None]


def _run(worker: _Worker, args: tuple[Any, ...]) -> None:
    """Start PROCESSES spawned processes running ``worker(index, barrier, failed, *args)``; each
    must finish without an exception."""
    context = multiprocessing.get_context("spawn")
    barrier = context.Barrier(PROCESSES)
    failed = context.Event()
    results = context.Queue()
    processes = [
        context.Process(target=_guarded, args=(worker, index, barrier, failed, results, args))
        for index in range(PROCESSES)
    ]
    for process in processes:
        process.start()
    errors: dict[int, str | None] = {}
    deadline = time.monotonic() + TOTAL_S
    try:
        while len(errors) < PROCESSES:
            index, error = results.get(timeout=max(1.0, deadline - time.monotonic()))
            errors[index] = error
    finally:
        for process in processes:
            process.join(timeout=max(1.0, deadline - time.monotonic()))
            if process.is_alive():
                process.kill()
                process.join()
        results.close()
    failures = {index: error for index, error in errors.items() if error is not None}
    assert not failures, "\n".join(f"process {i}:\n{e}" for i, e in sorted(failures.items()))
    assert [process.exitcode for process in processes] == [0] * PROCESSES


def _guarded(
    worker: _Worker,
    index: int,
    barrier: Barrier,
    failed: Event,
    results: Any,
    args: tuple[Any, ...],
) -> None:
    try:
        worker(index, barrier, failed, *args)
    except BaseException:  # reported to the test, which names the process and the traceback
        failed.set()
        barrier.abort()  # the others stop waiting for this one
        results.put((index, traceback.format_exc()))
        return
    results.put((index, None))


# -- the wheelhouse ------------------------------------------------------------------------------


def _wheelhouse_worker(
    index: int, barrier: Barrier, failed: Event, roots: list[str], built: str
) -> None:
    """Per fresh root: process 0 publishes the shared key while the others look it up until it
    is there (their lookups meet the root as it is being made); then each publishes its own key
    into the same new project folder and finds it."""
    from cuda_resolve.wheelhouse import Wheelhouse

    shared = make_key()
    own = make_key(arch_list=f"{index + 7}.0")
    for root in roots:
        house = Wheelhouse(Path(root), origin="a test")
        barrier.wait(timeout=BARRIER_S)
        if index == 0:
            house.publish(shared, Path(built), strip_debug=False)
        else:
            while house.lookup(shared) is None:
                if failed.is_set():
                    raise RuntimeError("another process failed")
        house.publish(own, Path(built), strip_debug=False)
        assert house.lookup(own) is not None


def test_processes_create_and_use_a_new_wheelhouse_at_once(tmp_path: Path) -> None:
    from cuda_resolve.wheelhouse import Wheelhouse

    built = make_wheel(tmp_path / "built")
    roots = [tmp_path / f"round{n}" / "lab" / "wheelhouse" for n in range(ROUNDS)]
    _run(_wheelhouse_worker, ([str(root) for root in roots], str(built)))
    keys = {make_key().digest, *(make_key(arch_list=f"{i + 7}.0").digest for i in range(PROCESSES))}
    for root in roots:
        house = Wheelhouse(root, origin="a test")
        entries = house.entries()
        assert {entry.key.digest for entry in entries} == keys
        assert all(house.verify(entry) is None for entry in entries)
        page = (house.simple_dir / "demo-ext" / "index.html").read_text(encoding="utf-8")
        assert all(entry.filename in page for entry in entries)
        assert not [p for p in (root / "wheels" / "demo-ext").iterdir() if p.name.startswith(".")]


# -- the cache -----------------------------------------------------------------------------------


def _cache_worker(index: int, barrier: Barrier, failed: Event, cache: str) -> None:
    """The first things a command writes under a new cache root: a log, an HTTP response, the
    probe cache, the parsed index."""
    os.environ["CUDA_RESOLVE_CACHE_DIR"] = cache
    from cuda_resolve.detect import _cache as probe_cache
    from cuda_resolve.index import default_index
    from cuda_resolve.net import cache as http_cache
    from cuda_resolve.paths import new_log_path

    barrier.wait(timeout=BARRIER_S)
    log = new_log_path(f"process{index}")
    log.write_text("written\n", encoding="utf-8")
    store = http_cache.HttpCache(http_cache.default_cache_dir())
    url = f"https://example.invalid/simple/p{index}/"
    entry = http_cache.CacheEntry(
        url=url,
        final_url=url,
        fetched_at=time.time(),
        content_type="text/html",
        etag=None,
        last_modified=None,
        body=f"page {index}".encode(),
    )
    store.put(entry, None)
    found = store.get(url, None)
    assert found is not None and found.body == entry.body
    probes = probe_cache.ProbeCache(probe_cache.default_cache_dir())
    probes.put("test", f"process{index}", index)
    probes.save()
    default_index()


def test_processes_create_and_use_a_new_cache_folder_at_once(tmp_path: Path) -> None:
    cache = tmp_path / "new" / "cache"
    _run(_cache_worker, (str(cache),))
    logs = sorted(p.name.split("-")[0] for p in (cache / "logs").iterdir())
    assert logs == [f"process{i}" for i in range(PROCESSES)]
    assert len(list((cache / "http").rglob("*.body"))) == PROCESSES
    assert json.loads((cache / "probes.json").read_text(encoding="utf-8"))["test"]
    assert list((cache / "index").glob("*.pickle"))
    assert not list(cache.rglob("*.tmp"))  # no temporary file left behind


# -- the journal ---------------------------------------------------------------------------------


def _journal_worker(
    index: int, barrier: Barrier, failed: Event, cache: str, pythons: list[str]
) -> None:
    """An install's first steps into a new cache root: take the target's lock (the locks
    folder), begin the stash (the journal folder), see its journal pending, commit."""
    os.environ["CUDA_RESOLVE_CACHE_DIR"] = cache
    from cuda_resolve.install.journal import default_journal_dir, pending
    from cuda_resolve.install.stash import Stash, default_lock_dir, target_lock

    python = pythons[index]
    barrier.wait(timeout=BARRIER_S)
    with target_lock(python, default_lock_dir(), timeout=TOTAL_S):
        stash = Stash.begin(python, environ=os.environ, journal_dir=default_journal_dir())
        assert stash.journal.path in [j.path for j in pending(default_journal_dir())]
        stash.commit()


def test_processes_create_and_use_a_new_journal_folder_at_once(tmp_path: Path) -> None:
    pythons = []
    for index in range(PROCESSES):  # one target each: their locks do not serialise them
        venv = tmp_path / f"target{index}"
        subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
        pythons.append(str(venv / "bin" / "python"))
    cache = tmp_path / "new" / "cache"
    _run(_journal_worker, (str(cache), pythons))
    assert len(list((cache / "locks").glob("target-*.lock"))) == PROCESSES
    assert list((cache / "journal").iterdir()) == []  # each committed: no journal left


def test_a_publish_survives_the_removal_of_its_projects_last_entry_meanwhile(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two processes, interleaved at the one point that matters: a publish has made sure the
    project folder is there; another process removes the project's last entry, which takes the
    emptied folder away; then the publish makes its staging folder in it."""
    from cuda_resolve.wheelhouse import Wheelhouse

    house = Wheelhouse(tmp_path / "wheelhouse", origin="a test")
    built = make_wheel(tmp_path / "built")
    last = house.publish(make_key(), built, strip_debug=False)
    real = tempfile.mkdtemp
    removed: list[str] = []

    def removed_first(*args: Any, **kwargs: Any) -> str:
        if not removed:
            house.remove(last)  # the other process, between the publish's mkdir and mkdtemp
            removed.append(last.key.digest)
        return str(real(*args, **kwargs))

    monkeypatch.setattr(tempfile, "mkdtemp", removed_first)  # the module store.py uses
    entry = house.publish(make_key(arch_list="8.0"), built, strip_debug=False)
    assert removed and house.entries() == [entry]
