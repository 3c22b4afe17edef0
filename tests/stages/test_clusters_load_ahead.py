"""The selection's kernel is loaded ahead, at the pair stage's end, where the clusters stage will
run it in this process, and typed as the stage's own call is (no second version compiled); the
blocks' files are opened ahead there too, for the columns and ids the stage reads, and the stage
takes them (none left held by the store)."""

import json
import subprocess

import numpy as np
import pytest

from tests.helpers import child_env, neardup_command, write_jsonl

_SETUP = """
import atexit, json, threading
from neardup.kernels.components import _select_kernel
from neardup.stages.clusters import ClustersStage
seen = {}
stage_run = ClustersStage.run
def run(self, run, engine):
    # at the stage's start: the kernel loaded, or its load under way
    seen["ahead"] = bool(_select_kernel.overloads) or any(t.name == "neardup-kernel-load" for t in threading.enumerate())
    ahead = run.store._ahead
    seen["opened"] = None if ahead is None else [ahead.columns, ahead.with_ids]
    info = stage_run(self, run, engine)
    seen["versions"] = len(_select_kernel.overloads)
    seen["left"] = run.store._ahead is not None
    return info
ClustersStage.run = run
atexit.register(lambda: print("SEEN " + json.dumps(seen)))
"""


def _seen(tmp_path, docs, setup=_SETUP):
    src = tmp_path / "in.jsonl"
    write_jsonl(src, docs)
    p = subprocess.run(neardup_command("dedup", src, "-o", tmp_path / "out", "-q", setup=setup),
                       capture_output=True, text=True, env=child_env(), timeout=300)
    assert p.returncode == 0, p.stderr
    return json.loads(next(x for x in p.stdout.splitlines() if x.startswith("SEEN "))[5:])


@pytest.mark.slow
def test_the_pair_stage_loads_the_selection_kernel_ahead_in_its_one_version(tmp_path):
    text = " ".join(f"word{i}" for i in range(60))
    seen = _seen(tmp_path, [text, text + " end", "something else entirely, quite different", text + " more"])
    assert seen == {"ahead": True, "versions": 1, "opened": [["source", "row"], False], "left": False}


@pytest.mark.slow
def test_nothing_is_loaded_ahead_without_verified_pairs(tmp_path):
    rng = np.random.default_rng(0)
    docs = [" ".join(f"w{x}" for x in rng.integers(0, 10 ** 6, 40)) for _ in range(4)]
    assert _seen(tmp_path, docs) == {"ahead": False, "versions": 0, "opened": None, "left": False}


# a corpus of more documents than NUMPY_UP_TO (lowered): the files' opens started once the pair
# stage's candidates are found (clusters.start_ahead), seen as they are verified (the kernel not loaded yet)
_EARLY = """
import threading
import neardup.kernels.arrays as arrays
arrays.NUMPY_UP_TO = 2
from neardup.stages.pairs import PairsStage
import neardup.kernels.bands as bands
pairs_whole, find_pairs, running = PairsStage.whole, bands.find_pairs, []
def whole(self, run, *a):
    running.append(run)
    return pairs_whole(self, run, *a)
def verify(*a, **k):  # the candidates found, before their verification
    from neardup.kernels.components import _select_kernel
    seen["pairs_verify"] = [bool(_select_kernel.overloads) or any(t.name == "neardup-kernel-load" for t in threading.enumerate()),
                            running[0].store._ahead is not None]
    return find_pairs(*a, **k)
PairsStage.whole, bands.find_pairs = whole, verify
from neardup.stages import corpus
openers, opened_blocks_init = [], corpus.OpenedBlocks.__init__
def counted(self, *a):
    openers.append(1)
    seen["openers"] = len(openers)
    opened_blocks_init(self, *a)
corpus.OpenedBlocks.__init__ = counted
""" + _SETUP


@pytest.mark.slow
def test_a_large_corpus_opens_the_files_from_the_pair_stages_verification(tmp_path):
    """Past NUMPY_UP_TO documents the blocks' files are opened once the pair stage's candidates
    are found (before they are verified; the kernel is loaded at its end, in its one version); the
    clusters stage takes the files. Without verified pairs the files are let go at the pair
    stage's end, and no kernel is loaded."""
    text = " ".join(f"word{i}" for i in range(60))
    (tmp_path / "none").mkdir()
    seen = _seen(tmp_path, [text, text + " end", "something else entirely, quite different", text + " more"], _EARLY)
    assert seen == {"pairs_verify": [False, True], "ahead": True, "versions": 1, "opened": [["source", "row"], False],
                    "left": False, "openers": 1}  # the files opened once
    rng = np.random.default_rng(0)
    docs = [" ".join(f"w{x}" for x in rng.integers(0, 10 ** 6, 40)) for _ in range(4)]
    assert _seen(tmp_path / "none", docs, _EARLY) == {"pairs_verify": [False, True], "ahead": False, "versions": 0,
                                                      "opened": None, "left": False, "openers": 1}


_FAILING = """
import atexit, json
from neardup.stages.clusters import ClustersStage
seen = {}
def run(self, run, engine):  # the run stops where the clusters stage would take the files opened ahead
    ahead = seen["ahead"] = run.store._ahead
    ahead.job.wait()  # every block opened: files the store holds
    seen["held"] = len(ahead.tables)
    raise RuntimeError("stopped before the clusters stage")
ClustersStage.run = run
atexit.register(lambda: print("SEEN " + json.dumps({"held": seen["held"], "closed": seen["ahead"].closed,
                                                    "left": len(seen["ahead"].tables)})))
"""


def test_a_run_stopped_before_the_clusters_stage_lets_go_of_the_files_opened_ahead(tmp_path):
    """DocStore.open_ahead (the pair stage's end) opens the blocks' files; a run that fails
    before the clusters stage takes them closes them at its end (Run.close): none left held."""
    text = " ".join(f"word{i}" for i in range(60))
    src = tmp_path / "in.jsonl"
    write_jsonl(src, [text, text + " end", "something else entirely, quite different", text + " more"],
                ids=["a", "b", "c", "d"])  # the ids: a column the stage reads of the block's file
    p = subprocess.run(neardup_command("dedup", src, "-o", tmp_path / "out", "-q", setup=_FAILING),
                       capture_output=True, text=True, env=child_env(), timeout=300)
    assert p.returncode != 0 and "stopped before the clusters stage" in p.stderr
    seen = json.loads(next(x for x in p.stdout.splitlines() if x.startswith("SEEN "))[5:])
    assert seen == {"held": 1, "closed": True, "left": 0}
