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
    import neardup
    neardup.dedup(sys.argv[1], output=sys.argv[2], overwrite=True)
    print(json.dumps(loads))
""")


def test_the_later_stages_kernels_are_loaded_once_in_their_own_thread(tmp_path):
    """A local run (a fresh process, the kernels in numba's cache) loads each kernel of
    LATER_KERNELS once, in the thread ``neardup-kernels``, not at its first call in the stage's
    thread; the read stage's own kernels stay its map threads'. The output is complete."""
    from neardup.stages.preload import LATER_KERNELS
    lines = [json.dumps({"id": i, "text": f"doc {i % 40} " + "shared words of a near duplicate " * 3})
             for i in range(200)]
    corpus = tmp_path / "c.jsonl"
    corpus.write_text("\n".join(lines) + "\n")
    for _ in range(2):  # the first may compile the kernels (compiled where they are first called)
        r = subprocess.run([sys.executable, "-c", PROBE, str(corpus), str(tmp_path / "out")],
                           env=child_env(), capture_output=True, text=True, timeout=300)
        assert r.returncode == 0, r.stderr
    loads = json.loads(r.stdout.strip().splitlines()[-1])
    later = [[m, n, t] for m, n, t in loads if (m, n) in LATER_KERNELS]
    assert sorted((m, n) for m, n, _ in later) == sorted(LATER_KERNELS)
    assert {t for _, _, t in later} == {"neardup-kernels"}
    assert all(t != "neardup-kernels" for m, n, t in loads if (m, n) not in LATER_KERNELS)
    assert json.loads((tmp_path / "out" / "stats.json").read_text())["counts"]["removed"] > 0
