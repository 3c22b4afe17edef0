"""The Ray engine on a cluster of three nodes on this machine (``ray.cluster_utils.Cluster``: each
node its own raylet and object store, one CPU each), with inputs, work dir and output on the local
S3 server, so that no node relies on another's disk: the output is the local engine's, byte for
byte, and stays so when a whole node is removed during the read stage or during the pair stage
(its running tasks are retried elsewhere, its object-store blocks rebuilt from their lineage).

The read stage is cut into one block per input file here (``layout.BLOCK_BYTES`` lowered in the
driver, which makes the plan), so that it has tasks to lose. A node is removed from a thread as
soon as the work dir shows the stage running: the read stage's first block summaries, or the
read stage recorded as done in state.json (the pair stage starts then).
"""

from __future__ import annotations

import json
import threading
import time

import pytest

import neardup
from neardup.stages import layout

from s3_server import s3, s3_server  # noqa: F401  (fixtures)

ray = pytest.importorskip("ray")
from ray.cluster_utils import Cluster  # noqa: E402

pytestmark = [pytest.mark.ray, pytest.mark.filterwarnings("ignore::DeprecationWarning")]

NODE = dict(num_cpus=1, object_store_memory=80 << 20)
OPTIONS = dict(threshold=0.7, id_column="id", quiet=True)


@pytest.fixture(scope="module")
def cluster():
    if ray.is_initialized():
        pytest.skip("a Ray instance is already connected in this process")
    c = Cluster(initialize_head=True, connect=False,
                head_node_args=dict(NODE, include_dashboard=False))
    for _ in range(2):
        c.add_node(**NODE)
    c.wait_for_nodes()
    yield c
    c.shutdown()


def _corpus(files: int = 12, docs: int = 60) -> dict:
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
        if p.is_file() and ".neardup-work" not in p.parts:
            rel = str(p.relative_to(folder))
            out[rel] = json.loads(p.read_text()) if rel == "stats.json" else p.read_bytes()
            if rel == "stats.json":
                out[rel].pop("seconds")
    return out


def _remove_node_when(cluster, s3, ready, done: threading.Event, removed: list):
    """A thread that removes one worker node once ``ready()`` (polled on the work dir) is true."""
    def watch():
        while not done.is_set():
            try:
                if ready():
                    node = cluster.worker_nodes and next(iter(cluster.worker_nodes))
                    if node:
                        cluster.remove_node(node)
                        removed.append(time.time())
                    return
            except Exception:  # the work dir not there yet
                pass
            time.sleep(0.05)
    t = threading.Thread(target=watch, daemon=True)
    t.start()
    return t


def _run_and_compare(cluster, s3, tmp_path, monkeypatch, name: str, ready=None):
    files = _corpus()
    for rel, data in files.items():
        s3.put(rel, data)
    monkeypatch.setattr(layout, "BLOCK_BYTES", 1)  # one read block per input file
    local = tmp_path / "local"
    neardup.dedup(s3.url("in/"), output=str(local), engine="local", **OPTIONS)
    work = s3.url(f"{name}/work")
    done, removed = threading.Event(), []
    watcher = _remove_node_when(cluster, s3, lambda: ready(work), done, removed) if ready else None
    try:
        res = neardup.dedup(s3.url("in/"), output=s3.url(f"{name}/out"), engine="ray", ray_address=cluster.address,
                            work_dir=work, **OPTIONS)
    finally:
        done.set()
        if watcher is not None:
            watcher.join(timeout=30)
    assert res.stats["counts"]["removed"] > 100
    got, want = _tree(s3, f"{name}/out/"), _local_tree(local)
    assert sorted(got) == sorted(want)
    assert [k for k in want if got[k] != want[k]] == []
    if ready is not None:
        assert removed, "the node was not removed during the run"
        cluster.add_node(**NODE)  # back to three nodes for the next test
        cluster.wait_for_nodes()
    return res


def test_three_nodes_work_dir_on_s3_same_bytes(cluster, s3, tmp_path, monkeypatch):
    res = _run_and_compare(cluster, s3, tmp_path, monkeypatch, "plain")
    assert res.stats["counts"]["input"] == 12 * 60


def _blocks_done(s3, work: str, at_least: int) -> bool:
    prefix = work.split("/", 3)[3] + "/read/"
    return sum(k.endswith(".json") and "/block-" in k for k in s3.keys(prefix)) >= at_least


def _read_done(s3, work: str) -> bool:
    key = work.split("/", 3)[3] + "/state.json"
    return "read" in json.loads(s3.get(key))["done"]


def test_node_removed_during_read(cluster, s3, tmp_path, monkeypatch):
    _run_and_compare(cluster, s3, tmp_path, monkeypatch, "kill-read", ready=lambda w: _blocks_done(s3, w, 2))


def test_node_removed_during_pairs(cluster, s3, tmp_path, monkeypatch):
    _run_and_compare(cluster, s3, tmp_path, monkeypatch, "kill-pairs", ready=lambda w: _read_done(s3, w))
