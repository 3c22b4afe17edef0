"""Issue 13, the Python API's part: what a newcomer meets in the first hour."""

from __future__ import annotations

import json
import os
import tempfile

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import neardup
from helpers import run_in_process

BASE = " ".join(f"w{i}" for i in range(40))
TEXTS = [BASE, BASE + " end", "quite another text " + " ".join(f"v{i}" for i in range(40)), BASE + " x"]


def _neardup_temps():
    return {p for p in os.listdir(tempfile.gettempdir()) if p.startswith("neardup-")}


def test_13_1_in_memory_calls_leave_nothing_on_disk(tmp_path, monkeypatch):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # a temp folder of this test's own
    before = _neardup_temps()
    for source in (pa.table({"text": TEXTS}), pd.DataFrame({"text": TEXTS}), TEXTS):
        result = neardup.dedup(source)
        assert result.output is None and result.stats["counts"]["removed"] == 2
    with pytest.raises(neardup.NeardupError):  # a failed call too
        neardup.dedup(pd.DataFrame({"body": TEXTS}))
    assert _neardup_temps() == before


def test_13_1_a_failed_run_over_paths_leaves_no_temporary_output(tmp_path, monkeypatch):
    # guards: api.run_dedup removing its temporary output after a failed run over paths (it was
    # left, .neardup and .neardup.lock in it), never an output the caller gave nor a good run's
    temps = tmp_path / "tmp"
    temps.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(temps))  # a temp folder of this test's own
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"text": TEXTS[0]}) + "\n{not json\n")
    with pytest.raises(neardup.NeardupError, match="bad.jsonl"):
        neardup.dedup(str(bad))
    assert _neardup_temps() == set()
    given = tmp_path / "out"
    with pytest.raises(neardup.NeardupError, match="bad.jsonl"):
        neardup.dedup(str(bad), output=str(given))
    assert (given / ".neardup").exists()  # the caller's folder stays, as the command line leaves it
    (tmp_path / "c.jsonl").write_text("".join(json.dumps({"text": t}) + "\n" for t in TEXTS))
    result = neardup.dedup(str(tmp_path / "c.jsonl"))
    assert _neardup_temps() == {os.path.basename(result.output)}  # a good run's output is its result's


def test_13_1_in_memory_call_with_output_writes_there(tmp_path):
    result = neardup.dedup(pa.table({"text": TEXTS}), output=str(tmp_path / "out"))
    assert result.output == str(tmp_path / "out") and (tmp_path / "out" / "removed.parquet").exists()


def test_13_3_dataframe_index_is_the_id_and_removed_has_the_row():
    df = pd.DataFrame({"text": TEXTS}, index=["a", "b", "c", "d"])
    result = neardup.dedup(df)
    assert list(result.kept.index) == ["a", "c"]
    removed = result.removed.to_pylist()
    assert [(r["id"], r["representative"], r["row"]) for r in removed] == [("b", "a", 1), ("d", "a", 3)]
    assert "__neardup_index__" not in result.kept.columns


def test_13_3_removed_parquet_row_joins_back_to_the_input(tmp_path):
    (tmp_path / "c.jsonl").write_text("".join(json.dumps({"text": t}) + "\n" for t in TEXTS))
    result = neardup.dedup(str(tmp_path / "c.jsonl"), output=str(tmp_path / "out"))
    rows = pq.read_table(tmp_path / "out" / "removed.parquet").column("row").to_pylist()
    assert rows == [1, 3]
    assert [TEXTS[r] for r in rows] == [TEXTS[1], TEXTS[3]]
    assert result.removed.column("row").to_pylist() == rows


def test_13_4_an_output_folder_with_results_needs_overwrite(tmp_path):
    (tmp_path / "c.jsonl").write_text("".join(json.dumps({"text": t}) + "\n" for t in TEXTS))
    out = str(tmp_path / "out")
    neardup.dedup(str(tmp_path / "c.jsonl"), output=out)
    with pytest.raises(neardup.ConfigError, match=r"earlier run; pass overwrite=True to replace"):  # API terms (issue 22)
        neardup.dedup(str(tmp_path / "c.jsonl"), output=out, threshold=0.5)
    assert neardup.dedup(str(tmp_path / "c.jsonl"), output=out, threshold=0.5, overwrite=True).stats
    from neardup.cli import main
    assert main(["dedup", str(tmp_path / "c.jsonl"), "-o", out, "--quiet"]) == 2
    assert main(["dedup", str(tmp_path / "c.jsonl"), "-o", out, "--quiet", "--overwrite"]) == 0


def test_13_4_the_output_folder_is_never_read_as_input(tmp_path):
    d = tmp_path / "data"
    d.mkdir()
    (d / "c.jsonl").write_text("".join(json.dumps({"text": t}) + "\n" for t in TEXTS))
    # an output inside an input folder would be read as input by the next run: refused, untouched
    with pytest.raises(neardup.ConfigError, match="lies inside the input"):
        neardup.dedup(str(d), output=str(d / "out"), overwrite=True)
    assert sorted(p.name for p in d.iterdir()) == ["c.jsonl"]
    result = neardup.dedup(str(d), output=str(tmp_path / "out"))
    assert [i["name"] for i in result.stats["inputs"]] == [str(d / "c.jsonl")]


def test_13_5_a_list_of_texts_returns_the_indexes_kept():
    result = neardup.dedup(TEXTS)
    assert result.kept == [0, 2]
    assert result.removed.column("id").to_pylist() == [1, 3]  # as result.kept gives them: integers


def test_13_5_a_list_of_paths_is_still_paths(tmp_path):
    (tmp_path / "c.jsonl").write_text("".join(json.dumps({"text": t}) + "\n" for t in TEXTS))
    result = neardup.dedup([str(tmp_path / "c.jsonl")], output=str(tmp_path / "out"))
    assert result.kept == [str(tmp_path / "out" / "kept" / "c.jsonl")]


def test_13_5_an_empty_dataframe_gives_an_empty_result():
    result = neardup.dedup(pd.DataFrame({"text": pd.Series([], dtype=str)}))
    assert len(result.kept) == 0 and result.removed.num_rows == 0
    assert result.stats["counts"]["input"] == 0


def test_13_5_a_datasetdict_is_deduplicated_across_its_splits():
    import datasets
    dd = datasets.DatasetDict({"train": datasets.Dataset.from_dict({"text": TEXTS[:3]}),
                               "test": datasets.Dataset.from_dict({"text": [TEXTS[3], "alone " * 9]})})
    result = neardup.dedup(dd)
    assert isinstance(result.kept, datasets.DatasetDict)
    assert result.kept["train"]["text"] == [TEXTS[0], TEXTS[2]]
    assert result.kept["test"]["text"] == ["alone " * 9]  # its near-copy of a train document is gone


def test_13_8_help_of_dedup_documents_every_option():
    doc = neardup.dedup.__doc__
    for name in ("threshold", "num_perm", "verify", "keep", "text_column", "id_column", "on_error", "engine",
                 "overwrite", "output"):
        assert name in doc


def test_13_3_an_id_field_is_the_id_unless_told_otherwise(tmp_path):
    (tmp_path / "c.jsonl").write_text("".join(json.dumps({"id": f"doc{i}", "text": t}) + "\n"
                                              for i, t in enumerate(TEXTS)))
    result = neardup.dedup(str(tmp_path / "c.jsonl"), output=str(tmp_path / "out"))
    assert result.removed.column("id").to_pylist() == ["doc1", "doc3"]
    assert result.stats["params"]["id_column"] == "id"
    # without an id field: FILE:LINE, lines counted from 1 as in the error messages
    (tmp_path / "d.jsonl").write_text("".join(json.dumps({"text": t}) + "\n" for t in TEXTS))
    result = neardup.dedup(str(tmp_path / "d.jsonl"), output=str(tmp_path / "out2"))
    # positions name the file below the inputs' common folder (the root of kept/), however it was typed
    assert result.removed.column("id").to_pylist() == ["d.jsonl:2", "d.jsonl:4"]
    assert result.removed.column("row").to_pylist() == [1, 3]


def test_13_3_an_id_field_with_repeats_is_an_error_that_says_how_to_choose(tmp_path):
    """The id field was not asked for: a repeat there is an error (whatever on_error says) that
    names both places and the two ways out; never a silent switch to other ids."""
    (tmp_path / "c.jsonl").write_text("".join(json.dumps({"id": "same", "text": t}) + "\n" for t in TEXTS))
    for on_error in ("fail", "skip"):
        with pytest.raises(neardup.InputError) as ei:
            neardup.dedup(str(tmp_path / "c.jsonl"), output=str(tmp_path / f"out-{on_error}"), on_error=on_error)
        msg = str(ei.value)
        assert msg.startswith(f"{tmp_path / 'c.jsonl'}:2: duplicate id 'same' (first at {tmp_path / 'c.jsonl'}:1)")
        assert "id_column='NAME'" in msg and "id_column=''" in msg and "--id-column" not in msg and "\n" not in msg
    # positions, asked for
    result = neardup.dedup(str(tmp_path / "c.jsonl"), output=str(tmp_path / "out"), id_column="")
    assert result.removed.column("id").to_pylist() == ["c.jsonl:2", "c.jsonl:4"]
    assert result.stats["params"]["id_column"] is None and result.stats["counts"]["rejected"] == 0
    with pytest.raises(neardup.InputError, match="duplicate id"):  # asked for: repeats are an error
        neardup.dedup(str(tmp_path / "c.jsonl"), output=str(tmp_path / "out2"), id_column="id")
    # the command line says the same
    ran = run_in_process("dedup", str(tmp_path / "c.jsonl"), "-o", str(tmp_path / "out3"), "-q")
    assert ran.returncode == 2 and "--id-column ''" in ran.stderr
    ran = run_in_process("dedup", str(tmp_path / "c.jsonl"), "-o", str(tmp_path / "out4"), "-q", "--id-column", "")
    assert ran.returncode == 0, ran.stderr


def test_13_3_a_dataframe_id_column_wins_over_its_index():
    pd = pytest.importorskip("pandas")
    df = pd.DataFrame({"id": [f"d{i}" for i in range(len(TEXTS))], "text": TEXTS}, index=[10, 11, 12, 13])
    result = neardup.dedup(df)
    assert result.removed.column("id").to_pylist() == ["d1", "d3"]
    assert list(result.kept.index) == [10, 12]
    # without an id column: the index
    result = neardup.dedup(df[["text"]])
    assert result.removed.column("id").to_pylist() == [11, 13]  # the index, with its type
    # positions, asked for
    result = neardup.dedup(df, id_column="")
    assert result.removed.column("id").to_pylist() == ["<table>:1", "<table>:3"]


def test_a_run_on_paths_reads_its_member_tables_when_they_are_used(tmp_path, monkeypatch):
    """removed and clusters of a run on paths hold a row per cluster member: read from the
    output when first used (once), not when the run ends, so that the command line (which uses
    only the counts) holds none of them (issue 28: the driver's memory flat)."""
    from neardup.io.storage.folder import Folder
    path = tmp_path / "a.jsonl"
    path.write_text("".join(json.dumps({"id": i, "text": t}) + "\n" for i, t in enumerate(TEXTS)))
    read = []
    real = Folder.read_table
    monkeypatch.setattr(Folder, "read_table", lambda self, name, *a, **k: (read.append(name), real(self, name, *a, **k))[1])
    result = neardup.dedup(str(path), output=str(tmp_path / "out"))
    assert "removed.parquet" not in read and "clusters.parquet" not in read
    assert result.removed.num_rows == 2 and result.clusters.num_rows == 3
    assert result.removed.num_rows == 2 and read.count("removed.parquet") == 1
    assert result.removed.equals(pq.read_table(tmp_path / "out" / "removed.parquet"))
