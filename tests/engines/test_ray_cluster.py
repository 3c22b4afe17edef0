"""The Ray engine on a cluster of three nodes on this machine (``ray.cluster_utils.Cluster``: each
node its own raylet and object store, one CPU each), with inputs, work dir and output on the local
S3 server, so that no node relies on another's disk: the output is the local engine's, byte for
byte, and stays so when a whole node is removed during the read stage or during the pair stage
(its running tasks are retried elsewhere, its object-store blocks rebuilt from their lineage).

The read stage is cut into one block per input file here (``workdir.BLOCK_BYTES`` lowered in the
driver, which makes the plan), so that it has tasks to lose. A node is removed from a thread as
soon as the work dir shows the stage running: the read stage's first block summary, then the
read stage recorded as done in state.json (the pair stage starts then). One run loses both worker
nodes, one a stage, and finishes on the head node.
"""

from __future__ import annotations

import json
import threading
import time
from functools import partial

import pytest
import ray
from ray.cluster_utils import Cluster

import neardup
from neardup.stages import workdir

from helpers import stop_suite_ray

pytestmark = [pytest.mark.slow, pytest.mark.ray, pytest.mark.filterwarnings("ignore::DeprecationWarning")]

NODE = dict(num_cpus=1, object_store_memory=80 << 20)
OPTIONS = dict(threshold=0.7, id_column="id", quiet=True)


@pytest.fixture(scope="module")
def cluster():
    stop_suite_ray()  # the runs here connect to this cluster, not to the suite's local Ray
    if ray.is_initialized():
        pytest.skip("a Ray instance is already connected in this process")
    c = Cluster(initialize_head=True, connect=False,
                head_node_args=dict(NODE, include_dashboard=False))
    for _ in range(2):
        c.add_node(**NODE)
    c.wait_for_nodes()
    yield c
    c.shutdown()


FILES, DOCS = 8, 60


def _corpus(files: int = FILES, docs: int = DOCS) -> dict:
    """JSONL files of short documents with near-duplicates across files."""
    out = {}
    for f in range(files):
        lines = []
        for d in range(docs):
            base = (f * docs + d) % (files * docs // 2)  # every text twice in the corpus
            words = " ".join(f"w{(base * 7 + j) % 997}" for j in range(40))
            lines.append(json.dumps({"id": f"f{f}-d{d}", "text": words + (" tail" if f % 2 else "")}))
        out[f"in/part-{f:02d}.jsonl"] = ("\n".join(lines) + "\n").encode()
    return out


def _tree(s3, prefix: str) -> dict:
    out = {}
    for k in s3.keys(prefix):
        data = s3.get(k)
        rel = k[len(prefix):]
        if rel.startswith(".neardup"):  # the ownership marker and lock: not the result
            continue
        if rel == "stats.json":
            d = json.loads(data)
            d.pop("seconds")
            out[rel] = d
        else:
            out[rel] = data
    return out


def _local_tree(folder) -> dict:
    out = {}
    for p in sorted(folder.rglob("*")):
        if p.is_file() and not p.relative_to(folder).parts[0].startswith(".neardup"):
            rel = str(p.relative_to(folder))
            out[rel] = json.loads(p.read_text()) if rel == "stats.json" else p.read_bytes()
            if rel == "stats.json":
                out[rel].pop("seconds")
    return out


def _remove_nodes_when(cluster, conditions, stages_done, done: threading.Event, removed: list):
    """A thread that removes one worker node as each of ``conditions`` (polled on the work dir,
    in order) becomes true; ``removed`` gets the stages done (``stages_done()``) once each node
    is gone."""
    def watch():
        todo = list(conditions)
        while todo and not done.is_set():
            try:
                ready = todo[0]()
            except Exception:  # the work dir is not there yet
                ready = False
            if ready:
                todo.pop(0)
                node = next(iter(cluster.worker_nodes), None)
                if node is not None:
                    cluster.remove_node(node)
                    removed.append(stages_done())
            time.sleep(0.05)
    t = threading.Thread(target=watch, daemon=True)
    t.start()
    return t


def _run_and_compare(cluster, s3, tmp_path, monkeypatch, name: str, conditions=()):
    for rel, data in _corpus().items():
        s3.put(rel, data)
    monkeypatch.setattr(workdir, "BLOCK_BYTES", 1)  # one read block per input file
    local = tmp_path / "local"
    neardup.dedup(s3.url("in/"), output=str(local), engine="local", **OPTIONS)
    work = s3.url(f"{name}/work")
    done, removed = threading.Event(), []
    watcher = _remove_nodes_when(cluster, [partial(c, s3, work) for c in conditions],
                                 lambda: sorted(json.loads(s3.get(_key(work, "state.json")))["done"]), done, removed)
    try:
        res = neardup.dedup(s3.url("in/"), output=s3.url(f"{name}/out"), engine="ray", ray_address=cluster.address,
                            work_dir=work, **OPTIONS)
    finally:
        done.set()
        watcher.join(timeout=60)
    assert res.stats["counts"]["removed"] > 100
    got, want = _tree(s3, f"{name}/out/"), _local_tree(local)
    assert sorted(got) == sorted(want)
    assert [k for k in want if got[k] != want[k]] == []
    assert len(removed) == len(conditions), "a node was not removed during the run"
    return res, removed


def _key(work: str, name: str) -> str:
    return work.split("/", 3)[3] + "/" + name


def read_under_way(s3, work: str) -> bool:
    """The read stage has written the summary of a block (and has more to read)."""
    return any(k.endswith(".json") for k in s3.keys(_key(work, "read/block-")))


def pairs_under_way(s3, work: str) -> bool:
    """The read stage is recorded as done: the pair stage is running."""
    return "read" in json.loads(s3.get(_key(work, "state.json")))["done"]


def test_three_nodes_work_dir_on_s3_same_bytes(cluster, s3, tmp_path, monkeypatch):
    res, _ = _run_and_compare(cluster, s3, tmp_path, monkeypatch, "plain")
    assert res.stats["counts"]["input"] == FILES * DOCS


def test_nodes_removed_during_read_then_pairs_same_bytes(cluster, s3, tmp_path, monkeypatch):
    """One worker node removed while the read stage runs, the other one while the pair stage
    runs (the head node, where the driver is connected, stays): the same bytes. The pair stage
    partitioned and shuffled (``NEARDUP_RAY_ONE_CALL=0``), as a large cluster runs it: a corpus
    this small would run it as one task."""
    monkeypatch.setenv("NEARDUP_RAY_ONE_CALL", "0")
    _, removed = _run_and_compare(cluster, s3, tmp_path, monkeypatch, "kill",
                                  conditions=[read_under_way, pairs_under_way])
    # each node was gone before its stage ended (the stages done when the removal completed)
    assert "read" not in removed[0] and removed[1] == ["read"], removed
