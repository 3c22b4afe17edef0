"""The Ray engine gives the local engine's output, byte for byte, on a Ray cluster started here.

One module-scoped local cluster (``ray.init(num_cpus=2)``) serves every test; runs of the CLI
join it with ``--ray-address`` (one starts its own instance, as users without a cluster do).
Every comparison reads every output file (stats.json without its "seconds").
"""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
import sysconfig
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import neardup
from neardup.engines.ray import RayEngine

from helpers import outputs, run_process

import psutil  # noqa: E402  test dependencies: a missing one fails the suite, it is not skipped
import ray  # noqa: E402

pytestmark = [pytest.mark.slow, pytest.mark.ray,
              pytest.mark.filterwarnings("ignore::DeprecationWarning:ray.data.context")]

STDLIB = Path(sysconfig.get_paths()["stdlib"])


@pytest.fixture(scope="module")
def cluster(ray_local):
    return ray_local


# --------------------------------------------------------------------------- helpers

def assert_same(local_dir, ray_dir):
    a, b = outputs(local_dir), outputs(ray_dir)
    assert sorted(a) == sorted(b)
    differ = [k for k in a if a[k] != b[k]]
    assert not differ, f"files differ: {differ}"
    assert "removed.parquet" in a and "stats.json" in a


def both(tmp_path, inputs, **options):
    """Runs the local then the Ray engine; returns their output folders (and the Ray stats)."""
    local = tmp_path / "local"
    rayed = tmp_path / "ray"
    neardup.dedup(inputs, output=str(local), engine="local", **options)
    res = neardup.dedup(inputs, output=str(rayed), engine="ray", **options)
    return local, rayed, res.stats


@pytest.fixture(scope="module")
def jsonl_corpus(tmp_path_factory):
    """Near-duplicates spread over four JSONL files (one gzip), with a bad line and an empty text."""
    from neardup.testing.synth import generate_corpus
    d = tmp_path_factory.mktemp("jsonl")
    texts = generate_corpus(2400, seed=11, doc_words=90).texts
    for i in range(4):
        lines = [json.dumps({"id": f"f{i}-{j}", "text": t}) for j, t in enumerate(texts[i::4])]
        if i == 1:
            lines[5:5] = ['{"id": "bad", "text": 7}', '{"id": "empty", "text": ""}', "not json", ""]
        data = ("\n".join(lines) + "\n").encode()
        if i == 2:
            with gzip.GzipFile(d / f"part{i}.jsonl.gz", "wb", mtime=0) as f:
                f.write(data)
        else:
            (d / f"part{i}.jsonl").write_bytes(data)
    return d


@pytest.fixture(scope="module")
def local_skip(tmp_path_factory, jsonl_corpus):
    """The local engine's output of jsonl_corpus with on_error="skip" (verify "exact", the default):
    the reference of several tests, made once."""
    out = tmp_path_factory.mktemp("local-skip") / "out"
    neardup.dedup(str(jsonl_corpus), output=str(out), on_error="skip")
    return out


@pytest.fixture(scope="module")
def parquet_corpus(tmp_path_factory):
    from neardup.testing.synth import generate_corpus
    d = tmp_path_factory.mktemp("parquet")
    texts = generate_corpus(1500, seed=12, doc_words=70).texts
    scores = [None if i % 11 == 0 else float(i % 5) for i in range(len(texts))]
    table = pa.table({"doc_id": [f"p{i}" for i in range(len(texts))], "body": texts, "quality": scores})
    pq.write_table(table.slice(0, 900), d / "a.parquet", row_group_size=250)
    pq.write_table(table.slice(900), d / "b.parquet", row_group_size=250)
    return d


def stdlib_subset():
    """A few hundred standard-library files with near-duplicates (the codecs of encodings/)."""
    globs = [str(STDLIB / "encodings" / "*.py"), str(STDLIB / "json" / "*.py"), str(STDLIB / "email" / "*.py"),
             str(STDLIB / "asyncio" / "*.py"), str(STDLIB / "lib2to3" / "**" / "*.py"),
             str(STDLIB / "importlib" / "**" / "*.py")]
    return [g for g in globs if list(Path("/").glob(g.lstrip("/")))]


# --------------------------------------------------------------------------- the driver's memory

def test_each_step_starts_without_the_refs_of_the_steps_before(cluster):
    """Ray Data's executors and datasets of a finished step are cyclic garbage holding its
    ObjectRefs (and with them the shuffle pieces Ray keeps inline in the driver); the driver
    collects them before it awaits a step's results, even with the collector off, so the refs
    it holds stay as many from step to step (issue 28)."""
    import gc
    from ray._private.worker import global_worker
    from neardup.engines import ray as ray_engine
    held = []
    release = ray_engine.release_driver_memory

    def keyed_rows(i: int) -> pa.Table:  # nested: pickled by value (the workers cannot import tests)
        return pa.table({"key": pa.array(range(i * 100, i * 100 + 100), pa.int64())})

    def counted():
        release()
        held.append(len(global_worker.core_worker.get_all_reference_counts()))

    gc.disable()
    try:
        with pytest.MonkeyPatch.context() as mp, RayEngine() as engine:
            mp.setattr(ray_engine, "release_driver_memory", counted)
            for _ in range(4):
                tables = engine.collect(engine.shuffle(engine.map(keyed_rows, range(6)), "key", 3))
                assert sum(t.num_rows for t in tables) == 600
    finally:
        gc.enable()
    assert held[3] <= held[1], held  # [0]: before the first step; the last: at the exit


def test_the_driver_freezes_what_it_holds_once_ray_has_started(cluster, monkeypatch):
    """Once Ray has started, the driver's objects are frozen (the later full collections walk
    only what the run makes): in a library call when nothing was frozen, given back at the exit;
    a caller's own frozen objects left as they are; in the program frozen for good."""
    import gc
    from neardup.engines import ray as ray_engine
    if gc.get_freeze_count():
        gc.unfreeze()
    try:
        monkeypatch.setattr(ray_engine, "last_work", lambda: False)
        assert ray_engine.freeze_driver_objects() and gc.get_freeze_count() > 0
        frozen = gc.get_freeze_count()
        made_since = [[] for _ in range(1000)]  # a second freeze would take these too
        # the caller's frozen objects left as they are (a frozen object another thread of the
        # driver frees lowers the count: it never rises without a freeze)
        assert not ray_engine.freeze_driver_objects() and gc.get_freeze_count() <= frozen
        del made_since
        gc.unfreeze()
        with RayEngine() as engine:
            assert engine._frozen and gc.get_freeze_count() > 0
        assert gc.get_freeze_count() == 0 and not engine._frozen
        monkeypatch.setattr(ray_engine, "last_work", lambda: True)
        assert not ray_engine.freeze_driver_objects() and gc.get_freeze_count() > 0
    finally:
        gc.unfreeze()


# --------------------------------------------------------------------------- same bytes

def test_one_call_on_one_node_or_for_a_small_step(monkeypatch):
    """A step that would be shuffled runs as one task with a node's cores on a cluster of one
    node whatever its size, on several nodes only under ONE_CALL_BYTES, never with
    NEARDUP_RAY_ONE_CALL=0 (no Ray started)."""
    from neardup.engines import ray as ray_engine
    engine = RayEngine()
    engine.nodes = 1
    assert engine.one_call(1e12)
    engine.nodes = 4
    assert engine.one_call(ray_engine.ONE_CALL_BYTES) and not engine.one_call(ray_engine.ONE_CALL_BYTES + 1)
    monkeypatch.setenv("NEARDUP_RAY_ONE_CALL", "0")
    engine.nodes = 1
    assert not engine.one_call(1)


@pytest.mark.parametrize("verify,shuffled", [("exact", False), ("estimate", False), ("exact", True)])
def test_jsonl_files_same_bytes(cluster, tmp_path, jsonl_corpus, verify, shuffled, monkeypatch):
    """On one node the pair and cluster stages run as one task each (``one_call``); shuffled:
    as on a cluster of several nodes, over partitions (three shuffles, then the star steps)."""
    if shuffled:
        monkeypatch.setenv("NEARDUP_RAY_ONE_CALL", "0")
    local, rayed, stats = both(tmp_path, str(jsonl_corpus), verify=verify, keep="longest", on_error="skip")
    assert stats["counts"]["removed"] > 100 and stats["counts"]["rejected"] == 2
    assert_same(local, rayed)


def test_mark_same_bytes(cluster, tmp_path, jsonl_corpus):
    """--mark (issue 31): marked/ (gzip included) and the rest, the local engine's bytes."""
    local, rayed, stats = both(tmp_path, str(jsonl_corpus), mark=True, on_error="skip")
    assert stats["counts"]["removed"] > 100 and len(stats["marked_files"]) == 4
    assert_same(local, rayed)


@pytest.mark.parametrize("verify", ["exact", "estimate"])
def test_parquet_same_bytes(cluster, tmp_path, parquet_corpus, verify):
    local, rayed, stats = both(tmp_path, str(parquet_corpus), verify=verify, keep="score:quality",
                               text_column="body", id_column="doc_id")
    assert stats["counts"]["removed"] > 50
    assert_same(local, rayed)


@pytest.mark.parametrize("verify", ["exact", "estimate"])
def test_stdlib_same_bytes(cluster, tmp_path, verify):
    inputs = stdlib_subset()
    local, rayed, stats = both(tmp_path, inputs, verify=verify, keep="longest", on_error="skip")
    assert stats["counts"]["input"] > 150 and stats["counts"]["removed"] > 5
    assert_same(local, rayed)


@pytest.mark.parametrize("id_column", ["", "id"])
def test_split_file_same_bytes(cluster, tmp_path, jsonl_corpus, monkeypatch, id_column):
    """A JSONL file cut into byte ranges (NEARDUP_SPLIT_BYTES), each read by a Ray task, gives the
    bytes of the local engine reading every file whole (guard: the lines of the ranges before
    not summed, ``base[b] = 0`` in io.splits.range_lines: rows name other lines, and the kept
    writer reads lines that are not the documents' and fails).
    part1.jsonl holds the bad lines (rejected with their lines)."""
    from neardup.io import discover
    from neardup.stages.workdir import plan_reads
    every = (jsonl_corpus / "part1.jsonl").stat().st_size // 5
    options = dict(keep="longest", on_error="skip", id_column=id_column)
    neardup.dedup(str(jsonl_corpus), output=str(tmp_path / "local"), engine="local", **options)
    monkeypatch.setenv("NEARDUP_SPLIT_BYTES", str(every))
    assert len(plan_reads(discover([str(jsonl_corpus)]))[1]) >= 15  # the three plain files, 5+ ranges each
    res = neardup.dedup(str(jsonl_corpus), output=str(tmp_path / "ray"), engine="ray", **options)
    assert res.stats["counts"]["rejected"] == 2
    assert_same(tmp_path / "local", tmp_path / "ray")


def test_verify_none_and_output_conversion(cluster, tmp_path, jsonl_corpus):
    local, rayed, _ = both(tmp_path, str(jsonl_corpus), verify="none", output_format="parquet", on_error="skip",
                           threshold=0.7)
    assert_same(local, rayed)


def test_in_memory_table(cluster, tmp_path):
    from neardup.testing.synth import generate_corpus
    table = pa.table({"text": generate_corpus(600, seed=13, doc_words=60).texts})
    a = neardup.dedup(table, output=str(tmp_path / "local"))
    b = neardup.dedup(table, output=str(tmp_path / "ray"), engine="ray")
    assert b.kept.equals(a.kept) and b.removed.equals(a.removed)
    assert_same(tmp_path / "local", tmp_path / "ray")


# --------------------------------------------------------------------------- errors are the local engine's

def _error(inputs, **options):
    with pytest.raises(neardup.NeardupError) as info:
        neardup.dedup(inputs, **options)
    return type(info.value), str(info.value)


def test_errors_are_the_local_engines(cluster, tmp_path):
    d = tmp_path / "in"
    d.mkdir()
    (d / "a.jsonl").write_text("".join(json.dumps({"id": f"a{i}", "text": f"alpha {i} words"}) + "\n"
                                       for i in range(30)))
    (d / "b.jsonl").write_text('{"id": "b0", "text": "fine"}\n{"id": "b1", "text": 3}\n')
    (d / "c.jsonl").write_text('not json at all\n')
    for opts in ({}, {"id_column": "id"}):
        assert _error(str(d), engine="ray", **opts) == _error(str(d), **opts)
    # duplicate ids: the same error, or (skip) the same rejected rows
    (d / "b.jsonl").write_text('{"id": "b0", "text": "fine"}\n{"id": "a7", "text": "again"}\n')
    (d / "c.jsonl").write_text('{"id": "a3", "text": "and again"}\n{"id": "b0", "text": "twice"}\n')
    assert _error(str(d), engine="ray", id_column="id") == _error(str(d), id_column="id")
    local, rayed, stats = both(tmp_path, str(d), id_column="id", on_error="skip")
    assert stats["counts"]["rejected"] == 3
    assert_same(local, rayed)


# --------------------------------------------------------------------------- fault tolerance, resume

# Kills, from a process of its own, the first worker of PARENT's that runs a task named like each
# target in turn; prints each command line it killed. (A thread of the driver's could not: the
# driver's garbage collection runs while its calls run, holding the GIL, and reads of 1,000
# documents can start and end within it.)
KILLER = r"""
import signal, sys, time
import psutil
parent, targets = psutil.Process(int(sys.argv[1])), sys.argv[2:]
while targets:
    for p in parent.children(recursive=True):
        try:
            cmd = " ".join(p.cmdline())
        except psutil.Error:
            continue
        if cmd.startswith("ray::") and not cmd.startswith("ray::IDLE") and targets[0] in cmd:
            try:
                p.send_signal(signal.SIGKILL)
            except psutil.Error:
                continue
            print(cmd.strip(), flush=True)
            targets.pop(0)
            break
    time.sleep(0.002)
"""


def test_worker_killed_mid_run_same_output(cluster, tmp_path):
    from neardup.testing.synth import generate_corpus
    d = tmp_path / "in"
    d.mkdir()
    texts = generate_corpus(8000, seed=14).texts
    for i in range(8):
        (d / f"p{i}.jsonl").write_text("".join(json.dumps({"text": t}) + "\n" for t in texts[i::8]))
    local = tmp_path / "local"
    neardup.dedup(str(d), output=str(local))
    # a read task, then a pair search
    killer = subprocess.Popen([sys.executable, "-c", KILLER, str(os.getpid()), "read_partition", "search_buckets"],
                              stdout=subprocess.PIPE, text=True)
    try:
        time.sleep(0.5)  # the killer has imported psutil
        neardup.dedup(str(d), output=str(tmp_path / "ray"), engine="ray", batch_size=256)
    finally:
        killer.kill()
        killed = killer.communicate()[0].split("\n")[:-1]
    assert killed, "no Ray worker was running a task to kill"
    assert_same(local, tmp_path / "ray")


@pytest.mark.parametrize("first,second", [("local", "ray"), ("ray", "local"), ("ray", "ray")])
def test_resume_across_engines(cluster, tmp_path, jsonl_corpus, local_skip, first, second):
    """One work directory for both engines: the stages one engine finished are not run again by
    the other, and the output is the same."""
    opts = dict(verify="exact", on_error="skip")
    reference = local_skip  # the local engine's output with opts
    work = tmp_path / "work"
    neardup.dedup(str(jsonl_corpus), output=str(tmp_path / "a"), engine=first, work_dir=str(work), **opts)
    state = json.loads((work / "state.json").read_text())
    for stage in ("clusters", "write"):  # as if the run had died after the pairs stage
        state["done"].pop(stage)
    (work / "state.json").write_text(json.dumps(state))
    again = neardup.dedup(str(jsonl_corpus), output=str(tmp_path / "b"), engine=second, resume=True,
                          work_dir=str(work), **opts)
    assert again.stats["seconds"]["read"] == 0 and again.stats["seconds"]["pairs"] == 0
    assert again.stats["seconds"]["clusters"] > 0
    assert_same(reference, tmp_path / "b")


@pytest.mark.parametrize("first,second", [("local", "ray"), ("ray", "local")])
def test_resume_in_the_middle_of_the_read_stage(cluster, tmp_path, first, second, monkeypatch):
    """Blocks read before an interruption are kept: the resumed run reads only the others."""
    from neardup.stages import workdir
    from neardup.testing.synth import generate_corpus
    monkeypatch.setattr(workdir, "BLOCK_BYTES", 1)  # one input file per block
    d = tmp_path / "in"
    d.mkdir()
    texts = generate_corpus(1200, seed=21, doc_words=60).texts
    for i in range(6):
        (d / f"p{i}.jsonl").write_text("".join(json.dumps({"text": t}) + "\n" for t in texts[i::6]))
    reference = tmp_path / "reference"
    neardup.dedup(str(d), output=str(reference))
    work = tmp_path / "work"
    neardup.dedup(str(d), output=str(tmp_path / "a"), engine=first, work_dir=str(work))
    # as if the run had died while reading: blocks 2 and 4 unfinished, nothing recorded as done
    for b in (2, 4):
        for f in work.glob(f"read/block-{b:06d}.*"):
            f.unlink()
    state = json.loads((work / "state.json").read_text())
    state["done"] = {}
    (work / "state.json").write_text(json.dumps(state))
    kept = {p.name: p.stat().st_mtime_ns for p in work.glob("read/block-*")}
    neardup.dedup(str(d), output=str(tmp_path / "b"), engine=second, resume=True, work_dir=str(work))
    state = json.loads((work / "state.json").read_text())
    assert state["done"]["read"]["blocks"] == 6 and state["done"]["read"]["blocks_read"] == 2
    assert {p.name: p.stat().st_mtime_ns for p in work.glob("read/block-*") if p.name in kept} == kept
    assert_same(reference, tmp_path / "b")


# --------------------------------------------------------------------------- command line

def test_cli_engine_ray(cluster, tmp_path, jsonl_corpus, local_skip):
    local = local_skip
    # joining this test's cluster
    r = run_process("dedup", jsonl_corpus, "-o", tmp_path / "joined", "--engine", "ray", "--ray-address", cluster,
             "--on-error", "skip", "--quiet")
    assert r.returncode == 0, r.stderr
    assert_same(local, tmp_path / "joined")
    # starting (and stopping) its own local instance
    r = run_process("dedup", jsonl_corpus, "-o", tmp_path / "own", "--engine", "ray", "--workers", "1",
             "--on-error", "skip")
    assert r.returncode == 0, r.stderr
    assert "kept" in r.stderr and "Traceback" not in r.stderr
    assert_same(local, tmp_path / "own")


def test_missing_ray_is_a_one_line_error(tmp_path, jsonl_corpus):
    hide = "sys.modules['ray'] = None"
    r = run_process("dedup", jsonl_corpus, "-o", tmp_path / "out", "--engine", "ray", block=("ray",))
    assert r.returncode == 2
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "pip install 'neardup[ray]'" in lines[0], r.stderr
    code = (f"import sys\n{hide}\nimport neardup\n"
            f"try:\n    neardup.dedup({str(jsonl_corpus)!r}, output={str(tmp_path / 'api')!r}, engine='ray')\n"
            f"except neardup.ConfigError as e:\n    print(e)\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert "pip install 'neardup[ray]'" in r.stdout, r.stdout + r.stderr
    # and neardup itself works without Ray
    r = run_process("dedup", jsonl_corpus, "-o", tmp_path / "local", "--quiet", "--on-error", "skip",
                    block=("ray",))
    assert r.returncode == 0, r.stderr


def test_nothing_to_deduplicate(cluster, tmp_path):
    """Only bad records; one document; no duplicates: still the local engine's files."""
    d = tmp_path / "in"
    d.mkdir()
    (d / "bad.jsonl").write_text('{"text": 1}\nnope\n')
    (d / "one.jsonl").write_text('{"id": "x", "text": "a lonely document of a few words"}\n')
    local, rayed, stats = both(tmp_path / "a", str(d), on_error="skip", id_column="id")
    assert stats["counts"] == {**stats["counts"], "input": 3, "kept": 1, "rejected": 2, "removed": 0}
    assert_same(local, rayed)
    (d / "two.jsonl").write_text('{"id": "y", "text": "quite another text with other words in it"}\n')
    (d / "bad.jsonl").unlink()
    local, rayed, _ = both(tmp_path / "b", str(d), id_column="id")
    assert_same(local, rayed)


def test_unreachable_address_is_a_one_line_error(tmp_path, jsonl_corpus):
    r = run_process("dedup", jsonl_corpus, "-o", tmp_path / "out", "--engine", "ray", "--ray-address", "127.0.0.1:1")
    assert r.returncode == 2
    assert r.stderr.strip().splitlines() == [r.stderr.strip()] and "cannot reach the Ray cluster" in r.stderr


def test_one_node_run_makes_no_dataset(cluster, tmp_path, jsonl_corpus, local_skip):
    """On one node no shuffle into several partitions is made (the duplicate-id check and the
    members' ranges into one), so the run's calls are plain tasks and its driver never imports
    Ray Data (whose executor and helper actors cost ~4 CPU-s and seconds before the first task
    of a 1M run); the output is the local engine's all the same."""
    code = ("import sys, neardup\n"
            f"neardup.dedup({str(jsonl_corpus)!r}, output={str(tmp_path / 'ray')!r}, engine='ray', "
            f"ray_address={cluster!r}, on_error='skip', quiet=True)\n"
            "print('ray.data' in sys.modules)\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip().splitlines()[-1] == "False", r.stdout
    assert_same(local_skip, tmp_path / "ray")
