"""Kernels loaded ahead from numba's disk cache (neardup.kernels.compile.load_ahead): a loaded
signature is not loaded again by the kernel's call, the ``neardup dedup`` program loads the
kernels of a run in a thread of its own, and its list is the kernels a dedup calls, in order."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

from helpers import child_env, neardup_command

# every load of a kernel from the cache, in order: (thread, module.kernel)
RECORD_LOADS = """
import atexit, json, sys, threading
from neardup.kernels import compile as _kc
_loads = []
_real_load = _kc._KernelCache.load_overload
def _load(self, sig, target_context):
    _loads.append((threading.current_thread().name, self._func.__module__ + "." + self._func.__name__))
    return _real_load(self, sig, target_context)
_kc._KernelCache.load_overload = _load
"""


def _python(code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env=child_env(), capture_output=True,
                          text=True, timeout=300)


def test_a_kernel_loaded_ahead_is_not_loaded_again_by_its_call():
    code = RECORD_LOADS + textwrap.dedent("""
        import numpy as np
        from neardup.kernels import components
        before = len(_loads)
        loaded = _kc.load_cached(components._select_kernel)
        after_ahead = len(_loads)
        sel = components.select_representatives(5, np.array([0, 1, 3]), np.array([1, 2, 4]),
                                                np.array([0.9, 0.9, 0.8]))
        print(json.dumps({"loaded": loaded, "by_ahead": after_ahead - before, "by_call": len(_loads) - after_ahead,
                          "again": _kc.load_cached(components._select_kernel),
                          "removed": sel.removed.tolist()}))
    """)
    _python(code)  # compiles the kernel when it is not cached yet
    r = _python(code)
    assert r.returncode == 0, r.stderr
    got = json.loads(r.stdout)
    assert got["loaded"] >= 1 and got["by_ahead"] == got["loaded"]
    assert got["by_call"] == 0 and got["again"] == 0
    assert got["removed"] == [False, True, False, False, True]


def _corpus(path) -> None:
    """Enough lines for a block's nesting scan (more brackets than MAX_NESTING), near-duplicates
    for the pairs, clusters and exact verification."""
    base = "the quick brown fox jumps over the lazy dog near the river bank on a sunny day " * 3
    with open(path, "w") as f:
        for i in range(700):
            text = f"{base} variant {i // 3} " + ("tail words here" if i % 3 else "other ending now")
            f.write(json.dumps({"id": i, "text": text}) + "\n")


def test_the_dedup_list_is_the_kernels_a_dedup_calls_in_order(tmp_path):
    """A dedup run by ``main(argv)`` (no load ahead: another program's call) loads kernels of
    neardup._DEDUP_KERNELS in that order, and every one of them is loaded by a run with the JSONL
    scanner or one with pyarrow's reader: a kernel a run no longer calls, or calls in another
    order, is caught here."""
    _corpus(tmp_path / "c.jsonl")
    code = RECORD_LOADS + textwrap.dedent(f"""
        from neardup import _DEDUP_KERNELS
        from neardup.cli import main
        code = main(["dedup", {str(tmp_path / "c.jsonl")!r}, "-o", {str(tmp_path / "out")!r}, "--quiet",
                     "--overwrite"])
        listed = [m + "." + n for m, n in _DEDUP_KERNELS]
        firsts = list(dict.fromkeys(k for _, k in _loads))
        print(json.dumps({{"code": code, "listed": listed, "loaded": [k for k in firsts if k in listed],
                           "threads": sorted({{t for t, _ in _loads}})}}))
    """)
    seen = set()
    for scanner in ("1", "0"):
        env = dict(child_env(), NEARDUP_JSONL_SCANNER=scanner)
        for _ in range(2):  # the first may compile what is not cached yet
            r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
            assert r.returncode == 0, r.stderr
        got = json.loads(r.stdout)
        assert got["code"] == 0
        assert got["loaded"] == [k for k in got["listed"] if k in got["loaded"]]  # in the list's order
        assert "neardup-kernels" not in got["threads"]
        seen.update(got["loaded"])
    assert seen == set(got["listed"])


def test_the_dedup_program_loads_its_kernels_in_a_thread(tmp_path):
    _corpus(tmp_path / "c.jsonl")
    seen = tmp_path / "seen.json"
    setup = RECORD_LOADS + f"atexit.register(lambda: open({str(seen)!r}, 'w').write(json.dumps(_loads)))\n"
    for _ in range(2):  # the first may compile what is not cached yet
        r = subprocess.run(neardup_command("dedup", tmp_path / "c.jsonl", "-o", tmp_path / "out", "--quiet",
                                           "--overwrite", setup=setup),
                           env=child_env(), capture_output=True, text=True, timeout=300)
        assert r.returncode == 0, r.stderr
    loads = json.loads(seen.read_text())
    ahead = [k for t, k in loads if t == "neardup-kernels"]
    assert ahead, loads
    import importlib
    from collections import Counter
    from neardup import _DEDUP_KERNELS
    listed = {m + "." + n: getattr(importlib.import_module(m), n) for m, n in _DEDUP_KERNELS}
    assert set(ahead) <= set(listed)
    # each signature loaded once: the run's calls found the thread's kernels loaded (or loaded one first)
    cached = {k: len(d._cache.files()._cache_file._load_index()) for k, d in listed.items()}
    assert all(n <= cached[k] for k, n in Counter(k for _, k in loads).items() if k in listed), (loads, cached)
    assert json.loads((tmp_path / "out" / "stats.json").read_text())["counts"]["removed"] > 0
