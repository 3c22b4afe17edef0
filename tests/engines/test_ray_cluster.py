"""The Ray engine on a cluster of three nodes on this machine (``ray.cluster_utils.Cluster``: each
node its own raylet and object store, one CPU each), with inputs, work dir and output on the local
S3 server, so that no node relies on another's disk: the output is the local engine's, byte for
byte, and stays so when a whole node is removed during the read stage or during the pair stage
(its running tasks are retried elsewhere, its object-store blocks rebuilt from their lineage).

The read stage is cut into one block per input file here (``workdir.BLOCK_BYTES`` lowered in the
driver, which makes the plan), so that it has tasks to lose. A node is removed from a process of
its own as soon as the work dir shows the stage running: the read stage's first block summary, then the
read stage recorded as done in state.json (the pair stage starts then). One run loses both worker
nodes, one a stage, and finishes on the head node.
"""

from __future__ import annotations

import json
import subprocess
import sys

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


# Removes, from a process of its own, one worker node as each condition (polled on the work dir
# on S3, in order) becomes true: the node's processes ended as Cluster.remove_node ends them (the
# raylet first; each asked to stop, then killed after 10 s); prints the stages done (state.json)
# once each node is gone. (A thread of the driver's would be held up by the driver's garbage
# collection, which runs while its calls run, holding the GIL, as the worker-killing test's was.)
#   argv: S3 endpoint, bucket, the work dir's key (ending in /), then CONDITION:PID,PID,... a node;
#   prints "ready" once it polls
REMOVER = r"""
import json, sys, time
import boto3, psutil
endpoint, bucket, work = sys.argv[1:4]
s3 = boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1",
                  aws_access_key_id="testing", aws_secret_access_key="testing")
print("ready", flush=True)

def done():
    return sorted(json.loads(s3.get_object(Bucket=bucket, Key=work + "state.json")["Body"].read())["done"])

def read_under_way():  # the read stage has written the summary of a block (and has more to read)
    found = s3.list_objects_v2(Bucket=bucket, Prefix=work + "read/block-").get("Contents", [])
    return any(o["Key"].endswith(".json") for o in found)

def pairs_under_way():  # the read stage is recorded as done: the pair stage is running
    return "read" in done()

def gone(p):
    try:
        return p.status() == psutil.STATUS_ZOMBIE  # the driver, their parent, reaps them later
    except psutil.NoSuchProcess:
        return True

for node in sys.argv[4:]:
    condition, pids = node.split(":")
    while True:
        try:
            if globals()[condition]():
                break
        except Exception:  # the work dir is not there yet
            pass
        time.sleep(0.05)
    for pid in map(int, pids.split(",")):
        try:
            p = psutil.Process(pid)
            p.terminate()
        except psutil.NoSuchProcess:
            continue
        end = time.monotonic() + 10
        while not gone(p) and time.monotonic() < end:
            time.sleep(0.01)
        if not gone(p):
            p.kill()
    print(json.dumps(done()), flush=True)
"""


def _node_pids(node) -> str:
    """The processes of a Ray node of ``cluster_utils.Cluster``, the raylet first (as
    ``Node.kill_all_processes`` ends them)."""
    kinds = sorted(node.all_processes, key=lambda kind: kind != "raylet")
    return ",".join(str(info.process.pid) for kind in kinds for info in node.all_processes[kind])


def _run_and_compare(cluster, s3, tmp_path, monkeypatch, name: str, conditions=()):
    for rel, data in _corpus().items():
        s3.put(rel, data)
    monkeypatch.setattr(workdir, "BLOCK_BYTES", 1)  # one read block per input file
    local = tmp_path / "local"
    neardup.dedup(s3.url("in/"), output=str(local), engine="local", **OPTIONS)
    work = s3.url(f"{name}/work")
    nodes = list(cluster.worker_nodes)[:len(conditions)]
    remover = subprocess.Popen([sys.executable, "-c", REMOVER, s3.endpoint, s3.bucket, _key(work, ""),
                                *(f"{c}:{_node_pids(n)}" for c, n in zip(conditions, nodes))],
                               stdout=subprocess.PIPE, text=True)
    try:
        assert remover.stdout.readline() == "ready\n"
        res = neardup.dedup(s3.url("in/"), output=s3.url(f"{name}/out"), engine="ray", ray_address=cluster.address,
                            work_dir=work, **OPTIONS)
    finally:
        remover.kill()
        removed = [json.loads(line) for line in remover.communicate()[0].split("\n")[:-1]]  # after "ready"
        alive = [node.any_processes_alive() for node in nodes[:len(removed)]]  # reaps those that ended
        for node in nodes[:len(removed)]:  # the Cluster's account of them
            cluster.remove_node(node)
    assert res.stats["counts"]["removed"] > 100
    got, want = _tree(s3, f"{name}/out/"), _local_tree(local)
    assert sorted(got) == sorted(want)
    assert [k for k in want if got[k] != want[k]] == []
    assert len(removed) == len(conditions) and not any(alive), "a node was not removed during the run"
    return res, removed


def _key(work: str, name: str) -> str:
    return work.split("/", 3)[3] + "/" + name


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
                                  conditions=["read_under_way", "pairs_under_way"])
    # each node was gone before its stage ended (the stages done when the removal completed)
    assert "read" not in removed[0] and removed[1] == ["read"], removed
