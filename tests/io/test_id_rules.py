"""One id per document (issue 29): the id a document gets is the same in kept/ (every format),
removed.parquet, clusters.parquet and the API's result, and the ``id`` field of the inputs is
found by reading whole records, never a switch to positions because a record is long."""

from __future__ import annotations

import json

import pyarrow.parquet as pq
import pytest

from helpers import run_in_process as neardup

TEXT = " ".join(f"w{i}" for i in range(80))


def test_a_text_folder_written_as_jsonl_has_the_ids_of_removed_parquet(tmp_path):
    # given as an absolute path: kept/ wrote the path as typed, removed.parquet the path below
    # the folder; a join by id found nothing
    src = tmp_path / "docs"
    (src / "sub").mkdir(parents=True)
    (src / "NEWS").write_text(TEXT)
    (src / "sub" / "NEWS.copy").write_text(TEXT)
    (src / "other").write_text(" ".join(f"v{i}" for i in range(80)))
    out = tmp_path / "out"
    ran = neardup("dedup", str(src.resolve()), "-o", str(out), "--output-format", "jsonl", "--quiet")
    assert ran.returncode == 0, ran.stderr
    kept_ids = {json.loads(line)["id"] for p in (out / "kept").rglob("*.jsonl") for line in p.read_text().splitlines()}
    removed_ids = set(pq.read_table(out / "removed.parquet").column("id").to_pylist())
    clusters_ids = set(pq.read_table(out / "clusters.parquet").column("id").to_pylist())
    assert kept_ids == {"NEWS", "other"} and removed_ids == {"sub/NEWS.copy"}
    assert clusters_ids == kept_ids & clusters_ids | removed_ids and "NEWS" in clusters_ids
    assert pq.read_table(out / "removed.parquet").column("representative").to_pylist() == ["NEWS"]


def test_a_first_record_over_a_mib_keeps_the_id_field(tmp_path):
    # the probe of the id field read 1 MiB: a longer first record hid its id and every input
    # silently took positional ids
    big = " ".join(f"x{i}" for i in range(200_000))  # > 1 MiB
    assert len(big) > 1 << 20
    path = tmp_path / "a.jsonl"
    path.write_text(json.dumps({"id": "long", "text": big}) + "\n"
                    + json.dumps({"id": "one", "text": TEXT}) + "\n"
                    + json.dumps({"id": "two", "text": TEXT}) + "\n")
    out = tmp_path / "out"
    ran = neardup("dedup", str(path), "-o", str(out), "--quiet")
    assert ran.returncode == 0, ran.stderr
    assert pq.read_table(out / "removed.parquet").column("id").to_pylist() == ["two"]


def test_a_dataframe_index_comes_back_with_its_type():
    # the index was stringified ('6193'): df[~df.index.isin(removed.id)] silently kept everything
    import pandas as pd
    import neardup
    df = pd.DataFrame({"text": [TEXT, TEXT + " x", "something else " * 20, TEXT]}, index=[6190, 6191, 6192, 6193])
    result = neardup.dedup(df, threshold=0.8)
    removed = result.removed.column("id").to_pylist()
    assert removed == [6191, 6193] and result.removed.column("representative").to_pylist() == [6190, 6190]
    assert list(df[~df.index.isin(removed)].index) == list(result.kept.index) == [6190, 6192]
    assert set(result.clusters.column("id").to_pylist()) == {6190, 6191, 6193}
    # a list's positions as integers, as result.kept gives them
    texts = [TEXT, TEXT + " x", "something else " * 20]
    r = neardup.dedup(texts, threshold=0.8)
    assert r.kept == [0, 2] and r.removed.column("id").to_pylist() == [1]


def test_a_dataframe_id_column_of_mixed_types_is_one_line():
    import pandas as pd
    import neardup
    from neardup.errors import ConfigError
    df = pd.DataFrame({"id": [1, "1", 2], "text": [TEXT, TEXT + " y", "other " * 30]})
    with pytest.raises(ConfigError, match=r"DataFrame column 'id' mixes int and str values"):
        neardup.dedup(df)


def test_a_text_file_named_like_a_records_position_is_refused(tmp_path):
    # x.jsonl line 3 and the text file "x.jsonl:3" got one id twice
    folder = tmp_path / "in"
    folder.mkdir()
    (folder / "x.jsonl").write_text("".join(json.dumps({"text": f"{TEXT} {i}"}) + "\n" for i in range(3)))
    (folder / "x.jsonl:3").write_text("other words " * 20)
    ran = neardup("dedup", str(folder), "-o", str(tmp_path / "out"), "--quiet")
    assert ran.returncode == 2 and "'x.jsonl:3', is also the positional id of record 3 of 'x.jsonl'" in ran.stderr
    assert len(ran.stderr.strip().splitlines()) == 1
    ran = neardup("index", "add", str(tmp_path / "idx"), str(folder))
    assert ran.returncode == 2 and "is also the positional id" in ran.stderr


def test_ids_replaced_by_positions_are_said(tmp_path):
    # a text folder with a JSONL that has ids: positions for every input, said in a note
    folder = tmp_path / "in"
    folder.mkdir()
    (folder / "a.jsonl").write_text(json.dumps({"id": "mine", "text": TEXT}) + "\n")
    (folder / "README").write_text(TEXT + " readme")
    ran = neardup("dedup", str(folder), "-o", str(tmp_path / "out"))
    assert ran.returncode == 0, ran.stderr
    assert "note: ids are positions" in ran.stderr and "has an 'id' field but" in ran.stderr
    assert pq.read_table(tmp_path / "out" / "removed.parquet").column("id").to_pylist() in (["README"], ["a.jsonl:1"])
    ran = neardup("index", "add", str(tmp_path / "idx"), str(folder))
    assert ran.returncode == 0 and "note: ids are positions" in ran.stderr
    # the field, asked for: no note, the record's id
    ran = neardup("dedup", str(folder), "-o", str(tmp_path / "out2"), "--id-column", "id")
    assert ran.returncode == 0 and "note: ids are positions" not in ran.stderr


def test_text_files_alone_are_not_matched_against_record_positions(monkeypatch):
    # no JSONL, Parquet or CSV input: no record id a text file's path could repeat, and the
    # paths of 100,000 files were matched against FILE:N one by one for nothing
    from neardup.io import columns
    from neardup.io.sources import make_source

    class Refuses:
        def fullmatch(self, text):
            raise AssertionError(f"matched {text!r}")

    monkeypatch.setattr(columns, "_POSITION", Refuses())
    texts = [make_source(f"/in/x.jsonl:{i}", f"/in/x.jsonl:{i}", f"x.jsonl:{i}", "text", None, True) for i in range(3)]
    columns.check_positional_ids(texts)  # nothing to refuse, nothing matched
    with pytest.raises(AssertionError, match="matched"):  # with a JSONL input, each path is matched
        columns.check_positional_ids(texts + [make_source("/in/x.jsonl", "/in/x.jsonl", "x.jsonl", "jsonl", None, True)])


@pytest.mark.parametrize("scanner", ["0", "1"])  # pyarrow's parse and the compiled scanner
def test_a_float_id_is_refused_in_a_jsonl_file_and_a_float_id_column_in_parquet(tmp_path, scanner, monkeypatch):
    # the README's rule (a float is refused): a JSONL id 2.0 became "2.0" and a Parquet id 2.0 became
    # "2", one value two ids by format; now a JSONL record with a float id is rejected with its line,
    # and a float id column is refused in one line naming the file
    import pyarrow as pa
    recs = [{"id": i, "text": f"{TEXT} {i}"} for i in range(300)]
    recs[150]["id"] = 2.0
    (tmp_path / "a.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))
    monkeypatch.setenv("NEARDUP_JSONL_SCANNER", scanner)
    ran = neardup("dedup", str(tmp_path / "a.jsonl"), "-o", str(tmp_path / "o1"), "--id-column", "id", "--quiet")
    assert ran.returncode == 2 and "a.jsonl:151" in ran.stderr and "got float 2.0" in ran.stderr, ran.stderr
    ran = neardup("dedup", str(tmp_path / "a.jsonl"), "-o", str(tmp_path / "o2"), "--id-column", "id", "--quiet",
                  "--on-error", "skip")
    assert ran.returncode == 0, ran.stderr
    rejected = pq.read_table(tmp_path / "o2" / "rejected.parquet").to_pylist()
    assert [(r["row"], "got float 2.0" in r["reason"]) for r in rejected] == [(150, True)], rejected
    pq.write_table(pa.table({"id": [1.0, 2.5, 3.0], "text": [TEXT] * 3}), tmp_path / "b.parquet")
    ran = neardup("dedup", str(tmp_path / "b.parquet"), "-o", str(tmp_path / "o3"), "--id-column", "id", "--quiet")
    assert ran.returncode == 2 and "b.parquet" in ran.stderr and "not a string or integer column (type double)" \
        in ran.stderr and len(ran.stderr.strip().splitlines()) == 1, ran.stderr
