"""kill -9 during `neardup index add`: the index afterwards is the one from before, readable, and
a rerun adds each document once."""

import os
import signal
import subprocess
import time

import pytest

import neardup.index.segments as segments
from neardup.index import Index

from helpers import child_env as env, neardup_command as cli, run_in_process, write_jsonl
from index_corpus import make_split

pytestmark = pytest.mark.slow  # index adds killed (kill -9) in fresh processes


# `neardup index add` with segments of 100 documents, so that an add of many writes several
# segments before its one commit (and a kill lands between them)
SMALL_SEGMENTS = "import neardup.index.segments as s; s.MAX_SEGMENT_DOCS = 100"


@pytest.fixture(scope="module")
def split():
    return make_split(900, seed=11)


def add_cmd(ix, path, name, crash_at=None):
    return cli("index", "add", ix, path, "--name", name, "--id-column", "id", "--batch-size", "50",
               setup=SMALL_SEGMENTS, crash_at=crash_at)


def snapshot(ix):
    with open(os.path.join(ix, "manifest.json"), "rb") as f:
        return f.read()


def check_unchanged(ix, before_manifest, probe, before_answers):
    assert snapshot(ix) == before_manifest
    idx = Index(ix)
    assert idx.query(probe) == before_answers
    committed = {s["name"] for s in idx.storage.read_manifest()["segments"]}
    return idx, committed


def check_rerun_adds_once(ix, path, split, name, base_docs):
    # the rerun in this process (the kill needs a process of its own; the rerun does not), with
    # add_cmd's arguments and small segments
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(segments, "MAX_SEGMENT_DOCS", 100)
        p = run_in_process("index", "add", ix, path, "--name", name, "--id-column", "id", "--batch-size", "50")
    assert p.returncode == 0, p.stderr
    idx = Index(ix)
    s = idx.stats()
    assert s["documents"] == base_docs + len(split.b_texts)
    assert s["sources"][name] == len(split.b_texts)
    res = idx.query(split.b_texts)
    for doc_id, matches in zip(split.b_ids, res):
        own = [m for m in matches if m.source == name and m.id == doc_id]
        assert len(own) == 1 and own[0].similarity == 1.0
    # nothing left over on disk: only the committed segments
    assert sorted(os.listdir(os.path.join(ix, "segments"))) == sorted(
        e["name"] for e in idx.storage.read_manifest()["segments"])


@pytest.mark.parametrize("point", ["segment_written", "before_manifest_switch"])
def test_kill_at_each_point_before_the_switch_leaves_the_index_as_before(tmp_path, split, point):
    ix = str(tmp_path / "ix")
    Index(ix).add(split.a_texts, ids=split.a_ids, name="A")
    b = write_jsonl(str(tmp_path / "b.jsonl"), split.b_texts, split.b_ids)
    before = snapshot(ix)
    probe = split.b_texts[:50]
    answers = Index(ix).query(probe)
    p = subprocess.run(add_cmd(ix, b, "B", crash_at=point), env=env(), capture_output=True)
    assert p.returncode == -signal.SIGKILL
    check_unchanged(ix, before, probe, answers)
    check_rerun_adds_once(ix, b, split, "B", len(split.a_texts))


def test_kill_after_the_switch_keeps_the_whole_add(tmp_path, split):
    ix = str(tmp_path / "ix")
    Index(ix).add(split.a_texts, ids=split.a_ids, name="A")
    b = write_jsonl(str(tmp_path / "b.jsonl"), split.b_texts, split.b_ids)
    p = subprocess.run(add_cmd(ix, b, "B", crash_at="after_manifest_switch"), env=env(), capture_output=True)
    assert p.returncode == -signal.SIGKILL
    assert Index(ix).stats()["documents"] == len(split.a_texts) + len(split.b_texts)


def test_kill_9_mid_add_at_a_random_moment(tmp_path, split):
    """A real kill -9 while segments are being written (several of them, one commit at the end)."""
    ix = str(tmp_path / "ix")
    Index(ix).add(split.a_texts, ids=split.a_ids, name="A")
    b = write_jsonl(str(tmp_path / "b.jsonl"), split.b_texts * 4, [f"{i}-{k}" for k in range(4) for i in split.b_ids])
    before = snapshot(ix)
    probe = split.b_texts[:50]
    answers = Index(ix).query(probe)
    committed = set(os.listdir(os.path.join(ix, "segments")))
    proc = subprocess.Popen(add_cmd(ix, b, "B"), env=env(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.time() + 120
    killed_mid_add = False
    while time.time() < deadline and proc.poll() is None:
        written = set(os.listdir(os.path.join(ix, "segments"))) - committed
        if len([w for w in written if not w.startswith(".tmp-")]) >= 2:
            os.kill(proc.pid, signal.SIGKILL)
            killed_mid_add = True
            break
        time.sleep(0.005)
    proc.wait()
    assert killed_mid_add, f"the add ended before the kill: {proc.stderr.read().decode()}"
    assert proc.returncode == -signal.SIGKILL
    check_unchanged(ix, before, probe, answers)
    # the next writer removes what the killed one left
    check_rerun_adds_once(ix, write_jsonl(str(tmp_path / "b1.jsonl"), split.b_texts, split.b_ids), split, "B",
                          len(split.a_texts))
