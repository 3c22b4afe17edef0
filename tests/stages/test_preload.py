"""The later stages' kernels loaded from numba's cache in a thread while the read stage runs
(neardup.stages.preload)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

from helpers import child_env

pytestmark = pytest.mark.slow  # fresh Pythons, each a small run (the first may compile the kernels)

PROBE = textwrap.dedent("""
    import json, sys, threading
    from neardup.kernels import compile as kc
    loads = []
    _load = kc._KernelCache.load_overload
    def load(self, sig, target_context):
        loads.append([self._func.__module__, self._func.__name__, threading.current_thread().name])
        return _load(self, sig, target_context)
    kc._KernelCache.load_overload = load
    import importlib
    from neardup.stages.preload import LATER_KERNELS, SCANNER_KERNELS, MINHASH_KERNELS, BAND_KERNELS
    def versions(module, name):
        files = getattr(importlib.import_module(module), name)._cache.files()
        return len(files._cache_file._load_index())
    held = {f"{m}.{n}": versions(m, n) for m, n in LATER_KERNELS + SCANNER_KERNELS + MINHASH_KERNELS + BAND_KERNELS}
    import neardup
    neardup.dedup(sys.argv[1], output=sys.argv[2], overwrite=True)
    print(json.dumps([loads, held]))
""")


def test_the_later_stages_kernels_are_loaded_once_in_their_own_thread(tmp_path):
    """A local run (a fresh process, the kernels in numba's cache) loads each kernel of
    LATER_KERNELS that the cache holds in one version once, in the thread ``neardup-kernels``,
    not at its first call in the stage's thread; one held in several versions (the test suite
    calls some kernels with other types) only at its first call, the version it needs. The read
    stage's own kernels are loaded there first, every version held, each once: by that thread, or
    by a map thread that called it first. The output is complete."""
    from neardup.stages.preload import BAND_KERNELS, LATER_KERNELS, MINHASH_KERNELS, SCANNER_KERNELS
    lines = [json.dumps({"id": i, "text": f"doc {i % 40} " + "shared words of a near duplicate " * 3})
             for i in range(200)]
    corpus = tmp_path / "c.jsonl"
    corpus.write_text("\n".join(lines) + "\n")
    for _ in range(2):  # the first may compile the kernels (compiled where they are first called)
        r = subprocess.run([sys.executable, "-c", PROBE, str(corpus), str(tmp_path / "out")],
                           env={**child_env(), "NEARDUP_JSONL_SCANNER": "1"}, capture_output=True, text=True,
                           timeout=300)
        assert r.returncode == 0, r.stderr
    loads, held = json.loads(r.stdout.strip().splitlines()[-1])
    ahead = [(m, n) for m, n in LATER_KERNELS if held[f"{m}.{n}"] == 1]
    assert ahead  # the test suite compiles other versions of a few kernels, not of all
    # the line parser of a small file's read calls _newlines too: its map thread may load it first
    read_too = {("neardup.kernels.lines", "_newlines")}
    in_thread = sorted((m, n) for m, n, t in loads if t == "neardup-kernels" and (m, n) in LATER_KERNELS)
    assert [k for k in in_thread if k not in read_too] == sorted(k for k in ahead if k not in read_too)
    assert not [(m, n) for m, n, t in loads if (m, n) in ahead and (m, n) not in read_too and t != "neardup-kernels"]
    # each loaded once; a read_too kernel at most once: a run whose JSONL the scanner reads and whose
    # kept lines are copied from its spans never calls _newlines (later_kernels leaves it out),
    # which the cache may hold all the same (in a cold cache the first run compiled it)
    counts = {k: sum(1 for m, n, _ in loads if (m, n) == k) for k in ahead}
    assert all(c == 1 for k, c in counts.items() if k not in read_too), counts
    assert all(c <= 1 for c in counts.values()), counts
    for k in SCANNER_KERNELS + MINHASH_KERNELS + BAND_KERNELS:  # compiled by the first run: held
        assert 1 <= sum(1 for m, n, _ in loads if (m, n) == k) <= held[".".join(k)], k
    # the thread starts before the stage's map threads: the scanner's first kernel is its first load
    assert any((m, n) in SCANNER_KERNELS + MINHASH_KERNELS + BAND_KERNELS
               for m, n, t in loads if t == "neardup-kernels")
    assert json.loads((tmp_path / "out" / "stats.json").read_text())["counts"]["removed"] > 0
