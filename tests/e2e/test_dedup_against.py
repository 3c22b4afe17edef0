"""``neardup dedup NEW --against INDEX [--update-index]``: deduplicating a new dump against what was
kept before, on both engines."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pyarrow.parquet as pq
import pytest

import neardup
from neardup.cli import main


@pytest.fixture(scope="module")
def dumps(tmp_path_factory):
    """Dump A, then dump B with copies of A's documents and of its own."""
    from neardup.synth import generate_corpus
    d = tmp_path_factory.mktemp("dumps")
    texts = generate_corpus(2400, seed=31, doc_words=80).texts
    (d / "a.jsonl").write_text("".join(json.dumps({"text": t}) + "\n" for t in texts[:1200]))
    (d / "b.jsonl").write_text("".join(json.dumps({"text": t}) + "\n" for t in texts[1200:]))
    return d


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
    kept_a = {f"{tmp_path / 'A' / 'kept' / 'a.jsonl'}:{i + 1}"
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
def test_against_on_ray_gives_the_local_bytes(tmp_path, dumps):
    import ray
    started = not ray.is_initialized()
    if started:
        ray.init(address="local", num_cpus=2, include_dashboard=False, logging_level=logging.WARNING,
                 log_to_driver=False)
    try:
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
    finally:
        if started:
            ray.shutdown()
