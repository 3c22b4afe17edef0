"""``neardup dedup NEW --against INDEX [--update-index]``: deduplicating a new dump against what was
kept before, on both engines."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest

import neardup
from neardup.cli import main

from helpers import write_dumps


@pytest.fixture(scope="module")
def dumps(tmp_path_factory):
    """Dump A, then dump B with copies of A's documents and of its own."""
    return write_dumps(tmp_path_factory.mktemp("dumps"))


def _kept_rows(out: Path, name: str):
    """0-based rows of a JSONL input kept in out/kept/NAME (lines are copied byte for byte)."""
    kept = (out / "kept" / name).read_text().splitlines()
    return kept


def test_against_an_index_of_the_old_dump_keeps_what_one_run_over_both_keeps(tmp_path, dumps):
    a, b = str(dumps / "a.jsonl"), str(dumps / "b.jsonl")
    assert main(["dedup", a, "-o", str(tmp_path / "A"), "--quiet"]) == 0
    assert main(["index", "add", str(tmp_path / "idx"), str(tmp_path / "A" / "kept"), "--name", "dumpA"]) == 0
    assert main(["dedup", b, "-o", str(tmp_path / "B"), "--against", str(tmp_path / "idx"), "--quiet"]) == 0
    assert main(["dedup", a, b, "-o", str(tmp_path / "AB"), "--quiet"]) == 0
    # the same documents of B are kept as by one run over A then B with --keep first
    assert _kept_rows(tmp_path / "B", "b.jsonl") == _kept_rows(tmp_path / "AB", "b.jsonl")
    stats = json.loads((tmp_path / "B" / "stats.json").read_text())
    assert stats["counts"]["removed_against_index"] > 50
    removed = pq.read_table(tmp_path / "B" / "removed.parquet").to_pylist()
    against = [r for r in removed if r["representative_source"] is not None]
    assert len(against) == stats["counts"]["removed_against_index"]
    kept_a = {f"dumpA/a.jsonl:{i + 1}"  # a position in A's kept file: NAME/FILE:LINE, the index's rule with --name
              for i in range(len(_kept_rows(tmp_path / "A", "a.jsonl")))}
    for r in against:  # every representative a real id of the old dump, with its source
        assert r["representative"] in kept_a and r["representative_source"] == "dumpA"
        assert r["similarity"] >= 0.8
    assert stats["counts"]["input"] == stats["counts"]["kept"] + stats["counts"]["removed"]


def test_update_index_adds_the_kept_documents_once_the_run_succeeded(tmp_path, dumps):
    a, b = str(dumps / "a.jsonl"), str(dumps / "b.jsonl")
    idx = str(tmp_path / "idx")
    first = neardup.dedup(a, output=str(tmp_path / "A"))
    neardup.Index(idx).add(str(tmp_path / "A" / "kept"), name="dumpA")
    before = neardup.Index(idx).stats()
    res = neardup.dedup(b, output=str(tmp_path / "B"), against=[idx], update_index=True)
    after = neardup.Index(idx).stats()
    assert after["documents"] == before["documents"] + res.stats["counts"]["kept"]
    assert after["segments"] == before["segments"] + 1
    assert res.stats["index_update"]["added"] == res.stats["counts"]["kept"]
    # B again against the updated index: every document is now known
    again = neardup.dedup(b, output=str(tmp_path / "B2"), against=[idx])
    assert again.stats["counts"]["kept"] <= 0.01 * again.stats["counts"]["input"]  # LSH misses only
    assert first.stats["counts"]["kept"] == before["documents"]


def test_against_refuses_an_index_of_other_parameters_in_one_line(tmp_path, dumps, capsys):
    idx = str(tmp_path / "idx")
    neardup.Index(idx, num_perm=64).add(["a b c d e f g h i j"])
    code = main(["dedup", str(dumps / "b.jsonl"), "-o", str(tmp_path / "out"), "--against", idx, "--quiet"])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "num_perm" in err
    assert not (tmp_path / "out" / "stats.json").exists()
    code = main(["dedup", str(dumps / "b.jsonl"), "-o", str(tmp_path / "out2"), "--against",
                 str(tmp_path / "nowhere"), "--quiet"])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "nowhere" in err


@pytest.mark.slow
@pytest.mark.ray
def test_against_on_ray_gives_the_local_bytes(tmp_path, dumps, ray_local):
    idx = str(tmp_path / "idx")
    neardup.dedup(str(dumps / "a.jsonl"), output=str(tmp_path / "A"))
    neardup.Index(idx).add(str(tmp_path / "A" / "kept"), name="dumpA")
    outs = {}
    for engine in ("local", "ray"):
        out = tmp_path / engine
        neardup.dedup(str(dumps / "b.jsonl"), output=str(out), against=[idx], engine=engine)
        outs[engine] = {p.relative_to(out).as_posix(): p.read_bytes() for p in sorted(out.rglob("*"))
                        if p.is_file() and p.name != "stats.json"}
    assert outs["local"] == outs["ray"]


def test_any_threshold_against_an_index_its_bands_and_rows_with_the_runs_threshold(tmp_path, dumps, capsys):
    """An index built at 0.8 (18 bands x 7 rows) with a run at 0.7 (23 x 5 for its own pairs):
    the index is searched with its own bands and rows and verified at 0.7, so exactly the
    documents a query at 0.7 finds are removed against it; the summary says in one line that
    recall falls, with P(candidate) at 0.7; --update-index adds keys of the index's banding."""
    from neardup.config.params import candidate_probability
    a, b = str(dumps / "a.jsonl"), str(dumps / "b.jsonl")
    idx = str(tmp_path / "idx")
    neardup.dedup(a, output=str(tmp_path / "A"))
    neardup.Index(idx).add(str(tmp_path / "A" / "kept"), name="dumpA")
    index = neardup.Index(idx)
    assert (index.config.bands, index.config.rows) == (18, 7)
    code = main(["dedup", b, "-o", str(tmp_path / "B"), "--against", idx, "--threshold", "0.7", "--update-index"])
    err = capsys.readouterr().err
    assert code == 0, err
    stats = json.loads((tmp_path / "B" / "stats.json").read_text())
    assert (stats["params"]["bands"], stats["params"]["rows"]) == (23, 5)
    (ix,) = stats["indexes"]
    p = float(candidate_probability(0.7, 18, 7))
    assert (ix["bands"], ix["rows"]) == (18, 7) and ix["candidate_probability"] == round(p, 4) and p < 0.985
    note = [line for line in err.splitlines() if "recall against it falls" in line]
    assert len(note) == 1 and f"{p:.3f}" in note[0] and "18 bands x 7 rows" in note[0]
    texts = [json.loads(line)["text"] for line in Path(b).read_text().splitlines()]
    found = {i for i, m in enumerate(neardup.Index(idx).query(texts, threshold=0.7)) if any(x.source == "dumpA" for x in m)}
    removed = pq.read_table(tmp_path / "B" / "removed.parquet").to_pylist()
    against = {int(r["id"].rsplit(":", 1)[1]) - 1 for r in removed if r["representative_source"] == "dumpA"}
    assert against == found and len(found) > 50
    assert any(r["similarity"] < 0.8 for r in removed if r["representative_source"] == "dumpA")
    # the kept documents went in with the index's bands and rows: each finds itself
    kept = (tmp_path / "B" / "kept" / "b.jsonl").read_text().splitlines()
    res = neardup.Index(idx).query([json.loads(line)["text"] for line in kept])
    assert all(any(m.source.endswith("b.jsonl") and m.similarity == 1.0 for m in r) for r in res), res[:3]
    # at or above the threshold the index was built for: no note
    code = main(["dedup", b, "-o", str(tmp_path / "B9"), "--against", idx, "--threshold", "0.9"])
    assert code == 0 and "recall against it falls" not in capsys.readouterr().err


def test_stats_json_is_written_once_per_run_even_with_update_index(tmp_path, dumps, monkeypatch):
    """stats.json says a result is complete: a run writes it once, last, after --update-index has
    added its kept documents (its record of that inside), and the staging folder is gone. Guard:
    writing it before the index update (and again after) fails here."""
    from neardup.io.storage import local

    written = []
    atomic_write = local.LocalFiles.atomic_write

    def spy(self, path):
        written.append(str(path))
        return atomic_write(self, path)

    a, b = str(dumps / "a.jsonl"), str(dumps / "b.jsonl")
    assert main(["dedup", a, "-o", str(tmp_path / "A"), "--quiet"]) == 0
    assert main(["index", "add", str(tmp_path / "idx"), str(tmp_path / "A" / "kept")]) == 0
    monkeypatch.setattr(local.LocalFiles, "atomic_write", spy)
    for options in ([], ["--update-index"]):
        written.clear()
        out = tmp_path / f"B{len(options)}"
        assert main(["dedup", b, "-o", str(out), "--against", str(tmp_path / "idx"), "--quiet", *options]) == 0
        stats_writes = [p for p in written if p.endswith("stats.json")]
        assert len(stats_writes) == 1, stats_writes
        assert written[-1] == stats_writes[0]  # the last file the run writes
        stats = json.loads((out / "stats.json").read_text())
        assert ("index_update" in stats) == bool(options)
        assert not (out / ".neardup-staging").exists()
    assert stats["index_update"]["added"] == stats["counts"]["kept"] > 0


# --------------------------------------------------------------------------- one state of the index per run (issue 29)

def _words(seed: int, n: int = 60):
    import random
    rng = random.Random(seed)
    return " ".join(f"w{rng.randrange(50_000)}" for _ in range(n))


# Runs `neardup ARGS` with one read block per input file; after the first block is matched, ACTION
# changes the index (what another process adding or compacting at that moment does)
_BETWEEN_BLOCKS = """
import neardup, neardup.stages.workdir as _w, neardup.stages.against as _ag
_w.BLOCK_BYTES = 1
_real, _done = _ag.match_block, []
def _match_block(*a, **k):
    out = _real(*a, **k)
    if not _done:
        _done.append(1)
        {action}
    return out
_ag.match_block = _match_block
"""


@pytest.fixture
def late_corpus(tmp_path):
    """An index of 60 old documents; 6 input files of 10 copies of old documents and 10 of
    late ones (documents the index does not hold when the run starts)."""
    from helpers import write_jsonl
    old = [_words(i) for i in range(60)]
    late = [_words(1000 + i) for i in range(60)]
    write_jsonl(tmp_path / "old.jsonl", old)
    write_jsonl(tmp_path / "late.jsonl", late)
    inputs = tmp_path / "in"
    inputs.mkdir()
    for f in range(6):
        write_jsonl(inputs / f"b{f}.jsonl", old[10 * f:10 * f + 10] + late[10 * f:10 * f + 10])
    idx = tmp_path / "idx"
    neardup.Index(str(idx)).add(str(tmp_path / "old.jsonl"), name="old")
    return tmp_path, idx, inputs


def _between_blocks(action, *args):
    import subprocess
    from helpers import child_env, neardup_command
    return subprocess.run(neardup_command(*args, setup=_BETWEEN_BLOCKS.format(action=action)),
                          capture_output=True, text=True, env=child_env(), timeout=300)


@pytest.mark.slow
def test_dedup_against_reads_one_state_of_the_index_while_another_process_adds(late_corpus):
    tmp, idx, inputs = late_corpus
    ran = _between_blocks(f"neardup.Index({str(idx)!r}).add({str(tmp / 'late.jsonl')!r}, name='late')",
                          "dedup", inputs, "-o", tmp / "out", "--against", idx, "--quiet")
    assert ran.returncode == 0, ran.stderr
    assert neardup.Index(str(idx)).stats()["documents"] == 120  # the add did commit, mid-run
    stats = json.loads((tmp / "out" / "stats.json").read_text())
    # before: blocks 2 to 6 read the index after the add (60 + 50 matched)
    assert stats["counts"]["removed_against_index"] == 60
    assert stats["indexes"][0]["matched"] == 60 and stats["indexes"][0]["generation"] == 1
    assert stats["indexes"][0]["kind"] == "exact"


@pytest.mark.slow
def test_a_compaction_under_dedup_against_is_one_line_and_resume_reads_the_same_state(late_corpus):
    tmp, idx, inputs = late_corpus
    neardup.Index(str(idx)).add(str(tmp / "late.jsonl"), name="late")  # 2 segments: a compaction merges them
    neardup.Index(str(idx)).remove(source="late")
    ran = _between_blocks(f"neardup.Index({str(idx)!r}).compact()",
                          "dedup", inputs, "-o", tmp / "out", "--against", idx, "--quiet")
    lines = [x for x in ran.stderr.splitlines() if x.strip()]
    assert ran.returncode == 2 and len(lines) == 1 and "was compacted" in lines[0], ran.stderr
    assert "Traceback" not in ran.stderr
    # --resume reads the state the run started with: it is gone, and it says so again
    code = main(["dedup", str(inputs), "-o", str(tmp / "out"), "--against", str(idx), "--quiet", "--resume"])
    assert code == 2
    assert main(["dedup", str(inputs), "-o", str(tmp / "out"), "--against", str(idx), "--quiet", "--overwrite"]) == 0
    stats = json.loads((tmp / "out" / "stats.json").read_text())
    assert stats["counts"]["removed_against_index"] == 60


# --------------------------------------------------------------------------- a Bloom index's extra false-positive rate

def _bloom_index(path, rate, segments, docs=5000):
    import numpy as np
    # 13 filters a document (the default before issue 30): the rates below are F ~ 13 * segments * rate
    index = neardup.Index(str(path), kind="bloom", false_positive_rate=rate, bands=13, rows=7)
    sig = np.zeros((docs, index.config.num_perm), np.uint32)
    rng = np.random.default_rng(5)
    for seg in range(segments):
        keys = rng.integers(0, 2 ** 63, size=(docs, index.config.bands), dtype=np.uint64) * np.uint64(2) + np.uint64(1)
        index.add_arrays(keys, [f"d{i}" for i in range(docs)], f"s{seg}", signatures=sig)
    return index


@pytest.fixture
def unrelated(tmp_path):
    from helpers import write_jsonl
    return write_jsonl(tmp_path / "new.jsonl", [_words(5000 + i) for i in range(500)])


def test_dedup_against_refuses_a_bloom_index_past_the_bound(tmp_path, unrelated, monkeypatch, capsys):
    from neardup.index import bloom
    monkeypatch.setattr(bloom, "REFUSE_RATE", 0.999, raising=False)  # an index as an older neardup would build it
    _bloom_index(tmp_path / "b", 0.05, 1)  # F ~ 0.49
    monkeypatch.undo()
    capsys.readouterr()
    # before: exit 0, no warning, and 266 of the 500 unrelated documents removed
    assert main(["dedup", str(unrelated), "-o", str(tmp_path / "out"), "--against", str(tmp_path / "b"),
                 "--quiet"]) == 2
    err = [x for x in capsys.readouterr().err.splitlines() if x.strip()]
    assert len(err) == 1 and "dedup --against would remove documents by it" in err[0] and "rate of 0.4" in err[0], err
    assert not (tmp_path / "out" / "stats.json").exists()


def test_stats_json_records_a_bloom_index_kind_and_rate_and_update_index_warns(tmp_path, unrelated, capsys):
    _bloom_index(tmp_path / "b", 1.2e-3, 1)  # F ~ 1.5%: above 1e-4, below the bound
    res = neardup.dedup(str(unrelated), output=str(tmp_path / "out"), against=[str(tmp_path / "b")],
                        update_index=True)
    ix = json.loads((tmp_path / "out" / "stats.json").read_text())["indexes"][0]
    # before: neither the kind nor the rates were recorded, and nothing warned
    assert ix["kind"] == "bloom" and ix["false_positive_rate"] == 1.2e-3
    assert 0.012 < ix["extra_false_positive_rate"] < 0.018 and "extra false-positive rate" in ix["rate_warning"]
    assert f"warning: {ix['rate_warning']}" in res.summary()
    update = res.stats["index_update"]  # the update raised F to ~3%: said
    import re
    rate = float(re.search(r"extra false-positive rate of ([0-9.e+-]+) ", update["rate_warning"]).group(1))
    assert update["added"] > 400 and 0.025 < rate < 0.036, update
    assert "--update-index" in res.summary()
    # with a third segment (F ~ 4.5%), the update would take it past 5%: it commits nothing, the output is complete
    _bloom_index(tmp_path / "b", 1.2e-3, 1)
    before = neardup.Index(str(tmp_path / "b")).stats()
    from helpers import write_jsonl
    others = write_jsonl(tmp_path / "others.jsonl", [_words(9000 + i) for i in range(500)])  # not in the index
    code = main(["dedup", str(others), "-o", str(tmp_path / "out3"), "--against", str(tmp_path / "b"),
                 "--update-index", "--quiet"])
    after = neardup.Index(str(tmp_path / "b")).stats()
    assert 0.04 < before["extra_false_positive_rate"] < 0.05, before
    err = capsys.readouterr().err
    assert code == 2 and (tmp_path / "out3" / "stats.json").exists() and "this add would leave it" in err, err
    assert (after["segments"], after["generation"]) == (before["segments"], before["generation"])


def test_update_index_over_two_dumps_of_one_layout_adds_distinct_ids(tmp_path, dumps):
    # the run's positional ids (b.jsonl:N, below each dump's folder) would repeat from one dump
    # to the next; the index names the file as given
    import shutil
    idx = str(tmp_path / "idx")
    for d in ("d1", "d2"):
        (tmp_path / d).mkdir()
        shutil.copy(dumps / ("a.jsonl" if d == "d1" else "b.jsonl"), tmp_path / d / "part.jsonl")
    neardup.Index(idx).add(["a first text of the index, alone here"], ids=["seed"])
    for d in ("d1", "d2"):
        res = neardup.dedup(str(tmp_path / d), output=str(tmp_path / ("out-" + d)), against=[idx], update_index=True)
        assert res.stats["index_update"]["added"] == res.stats["counts"]["kept"] > 0
    ids = neardup.Index(idx).query([json.loads((tmp_path / "d2" / "part.jsonl").read_text().splitlines()[-1])["text"]])
    assert any(m.id.startswith(str(tmp_path / "d2" / "part.jsonl") + ":") for m in ids[0])
