"""neardup.integrations.datatrove in real datatrove pipelines (LocalPipelineExecutor, JsonlReader,
JsonlWriter): the index filter removes what ``neardup dedup --against`` removes, marks, runs as
several ranks against one index, and the whole-corpus steps keep what ``neardup dedup`` keeps."""

from __future__ import annotations

import json
import random
import shutil

import pyarrow.parquet as pq
import pytest

pytest.importorskip("datatrove")
pytest.importorskip("orjson")

from datatrove.executor import LocalPipelineExecutor  # noqa: E402
from datatrove.pipeline.readers import JsonlReader  # noqa: E402
from datatrove.pipeline.writers import JsonlWriter  # noqa: E402

import neardup  # noqa: E402
from helpers import run_in_process, write_jsonl  # noqa: E402
from neardup.errors import ConfigError, NeardupError  # noqa: E402
from neardup.integrations.datatrove import (NeardupCommit, NeardupDedup, NeardupFilter,  # noqa: E402
                                            corpus_writer, kept_reader)


def _text(rng, n=60):
    return " ".join(f"w{rng.randrange(5000)}" for _ in range(n))


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    """An index of 12 old documents; new/ (two files, ids and metadata) with 4 near-copies of
    indexed documents and 10 documents of their own, none a near-duplicate of another new one."""
    rng = random.Random(31)
    root = tmp_path_factory.mktemp("dt")
    old = [_text(rng) for _ in range(12)]
    index = root / "old.ndx"
    neardup.Index(str(index)).add(old, ids=[f"old-{i}" for i in range(12)], name="old")
    fresh = [_text(rng) for _ in range(10)]
    copies = [old[i] + " and one more" for i in (1, 4, 7, 10)]
    new = root / "new"
    new.mkdir()
    records = [{"id": f"new-{i}", "text": t, "metadata": {"n": i}} for i, t in enumerate(fresh + copies)]
    rng.shuffle(records)
    write_jsonl(new / "a.jsonl", records[:7])
    write_jsonl(new / "b.jsonl", records[7:])
    return {"root": root, "index": index, "old": old, "new": new, "records": {r["id"]: r for r in records}}


def _read(folder):
    return [json.loads(line) for p in sorted(folder.glob("*.jsonl")) for line in p.open()]


def _pipeline(steps, tmp_path, name, tasks=1, workers=1):
    LocalPipelineExecutor(steps, tasks=tasks, workers=workers, logging_dir=str(tmp_path / f"logs-{name}")).run()


@pytest.fixture(scope="module")
def against(corpus):
    """``neardup dedup new/ --against old.ndx``: removed id -> representative (the indexed id)."""
    out = corpus["root"] / "against"
    ran = run_in_process("dedup", corpus["new"], "-o", out, "--against", corpus["index"], "--id-column", "id")
    assert ran.returncode == 0, ran.stderr
    return dict(zip(*pq.read_table(out / "removed.parquet", columns=["id", "representative"]).to_pydict().values()))


def test_drop_removes_what_dedup_against_removes(corpus, against, tmp_path):
    # guards `keep[m.doc] = False` (nothing dropped without it) and duplicate_of = the indexed
    # id (`mid` -> `msrc` names the source instead)
    _pipeline([JsonlReader(str(corpus["new"])),
               NeardupFilter(corpus["index"], exclusion_writer=JsonlWriter(str(tmp_path / "ex"), compression=None)),
               JsonlWriter(str(tmp_path / "kept"), compression=None)], tmp_path, "drop")
    kept, removed = _read(tmp_path / "kept"), _read(tmp_path / "ex")
    assert len(against) == 4
    assert {d["id"]: d["metadata"]["duplicate_of"] for d in removed} == against
    assert {d["id"] for d in kept} == set(corpus["records"]) - set(against)
    for d in kept + removed:  # datatrove's ids and the documents' own metadata kept
        assert d["metadata"]["n"] == corpus["records"][d["id"]]["metadata"]["n"]
    assert all(d["metadata"]["similarity"] >= 0.8 and d["metadata"]["duplicate_source"] == "old" for d in removed)


def test_mark_keeps_every_document_and_marks_the_duplicates(corpus, against, tmp_path):
    # guards the mark mode's `[True] * len(batch)` (drop's answer would lose the duplicates)
    _pipeline([JsonlReader(str(corpus["new"])), NeardupFilter(corpus["index"], mode="mark", batch_size=3),
               JsonlWriter(str(tmp_path / "out"), compression=None)], tmp_path, "mark")
    out = _read(tmp_path / "out")
    assert {d["id"] for d in out} == set(corpus["records"])
    assert {d["id"]: d["metadata"]["duplicate_of"] for d in out if d["metadata"]["duplicate_of"]} == against
    assert all(d["metadata"]["similarity"] is None for d in out if d["id"] not in against)


def test_ranks_against_one_index_then_one_commit(corpus, against, tmp_path):
    # two ranks, one index: each rank writes its own part, the commit adds both (guards the rank
    # in part_name: with one name for all, rank 1's part replaces rank 0's and half is lost)
    index = tmp_path / "idx.ndx"
    shutil.copytree(corpus["index"], index)
    adds = tmp_path / "adds"
    _pipeline([JsonlReader(str(corpus["new"])), NeardupFilter(index, additions=adds),
               JsonlWriter(str(tmp_path / "kept"), compression=None)], tmp_path, "ranks", tasks=2)
    assert sorted(p.name for p in adds.iterdir()) == ["rank-00000.parquet", "rank-00001.parquet"]
    assert {d["id"] for d in _read(tmp_path / "kept")} == set(corpus["records"]) - set(against)
    _pipeline([NeardupCommit(index, adds, name="dump2")], tmp_path, "commit")
    assert neardup.Index(str(index)).stats()["sources"] == {"old": 12, "dump2": 10}
    # the added documents are found again, under their datatrove ids
    fresh = [r for i, r in corpus["records"].items() if i not in against]
    found = neardup.Index(str(index)).query([r["text"] for r in fresh])
    assert [m[0].id for m in found] == [r["id"] for r in fresh]
    with pytest.raises(NeardupError, match="already"):  # a second commit adds nothing twice
        _pipeline([NeardupCommit(index, adds, name="dump2")], tmp_path, "again")


def test_whole_corpus_dedup_inside_a_pipeline(corpus, tmp_path):
    # the ranks write, one task runs neardup dedup, a reader reads the kept documents back;
    # guards corpus_writer's adapter (datatrove's own drops the id 0: "id field 'id' is missing")
    dup = dict(corpus["records"]["new-0"], id="new-0-copy")
    zero = {"id": 0, "text": _text(random.Random(0)), "metadata": {"n": 0}}  # a falsy id, kept as "0"
    write_jsonl(tmp_path / "extra.jsonl", [dup, zero])
    src = tmp_path / "src"
    shutil.copytree(corpus["new"], src)
    shutil.copy(tmp_path / "extra.jsonl", src / "c.jsonl")
    docs, out = tmp_path / "docs", tmp_path / "out"
    _pipeline([JsonlReader(str(src)), corpus_writer(docs)], tmp_path, "write", tasks=2)
    _pipeline([NeardupDedup(docs, out)], tmp_path, "dedup")
    removed = pq.read_table(out / "removed.parquet").to_pydict()
    assert dict(zip(removed["id"], removed["representative"])) == {"new-0-copy": "new-0"}
    seen = []
    _pipeline([kept_reader(out), lambda data, rank, ws: seen.extend((d.id, d.metadata["n"]) for d in data)],
              tmp_path, "read")
    assert sorted(seen) == sorted([(i, r["metadata"]["n"]) for i, r in corpus["records"].items()] + [("0", 0)])


def test_a_null_id_is_never_written_as_none(tmp_path):
    # a record whose "id" is null reaches datatrove as Document(id=None): corpus_writer wrote it as
    # the id "None" (two of them: "duplicate id 'None'"); it is written null, and refused as such
    rng = random.Random(3)
    src = tmp_path / "src"
    src.mkdir()
    write_jsonl(src / "a.jsonl", [{"text": _text(rng), "id": "x"}, {"text": _text(rng), "id": None}])
    docs = tmp_path / "docs"
    _pipeline([JsonlReader(str(src)), corpus_writer(docs)], tmp_path, "write")
    import gzip
    written = [json.loads(line) for p in sorted(docs.glob("*.jsonl.gz")) for line in gzip.open(p, "rt")]
    assert [r["id"] for r in written] == ["x", None]
    with pytest.raises(NeardupError, match="id field 'id' is null") as e:
        _pipeline([NeardupDedup(docs, tmp_path / "out")], tmp_path, "dedup")
    assert "\n" not in str(e.value)


def test_a_null_id_never_reaches_an_index_as_none(corpus, tmp_path):
    # NeardupFilter's additions wrote a null id as "None", which the commit added to the index; it
    # is written null, and the commit refuses it in one line
    rng = random.Random(5)
    src = tmp_path / "src"
    src.mkdir()
    write_jsonl(src / "a.jsonl", [{"text": _text(rng), "id": "y"}, {"text": _text(rng), "id": None}])
    index = tmp_path / "idx.ndx"
    shutil.copytree(corpus["index"], index)
    adds = tmp_path / "adds"
    _pipeline([JsonlReader(str(src)), NeardupFilter(index, additions=adds)], tmp_path, "filter")
    assert pq.read_table(adds / "rank-00000.parquet").column("id").to_pylist() == ["y", None]
    with pytest.raises(NeardupError, match="None") as e:
        _pipeline([NeardupCommit(index, adds, name="dump3")], tmp_path, "commit")
    assert "\n" not in str(e.value)
    assert neardup.Index(str(index)).stats()["sources"] == {"old": 12}  # nothing added


def test_one_task_steps_refuse_ranks(corpus, tmp_path):
    with pytest.raises(ConfigError, match="tasks=1"):
        _pipeline([NeardupDedup(corpus["new"], tmp_path / "out")], tmp_path, "two", tasks=2)
    with pytest.raises(ConfigError, match="mode"):
        NeardupFilter(corpus["index"], mode="remove")


@pytest.mark.slow
def test_ranks_against_a_redis_index(corpus, against, redis_url, tmp_path):
    # the same filter and commit on an index on a real redis-server: two ranks read it, one commit adds
    neardup.Index(redis_url).add(corpus["old"], ids=[f"old-{i}" for i in range(12)], name="old")
    adds = tmp_path / "adds"
    _pipeline([JsonlReader(str(corpus["new"])),
               NeardupFilter(redis_url, additions=adds, exclusion_writer=JsonlWriter(str(tmp_path / "ex"), compression=None)),
               JsonlWriter(str(tmp_path / "kept"), compression=None)], tmp_path, "redis", tasks=2)
    assert {d["id"]: d["metadata"]["duplicate_of"] for d in _read(tmp_path / "ex")} == against
    _pipeline([NeardupCommit(redis_url, adds, name="dump2")], tmp_path, "commit")
    assert neardup.Index(redis_url).stats()["sources"] == {"old": 12, "dump2": 10}


def test_import_neardup_leaves_datatrove_alone():
    # guards the lazy import (a `from . import datatrove` in neardup/integrations/__init__.py fails it)
    import subprocess
    import sys
    from helpers import child_env
    code = "import sys, neardup, neardup.integrations; print('datatrove' in sys.modules)"
    r = subprocess.run([sys.executable, "-c", code], env=child_env(), capture_output=True,
                       text=True, timeout=120)
    assert r.stdout.strip() == "False", r.stderr
