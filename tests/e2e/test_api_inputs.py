"""What the Python API takes and gives back, on the inputs a user holds (tables, DataFrames)."""

from __future__ import annotations

import pandas as pd
import pyarrow as pa
import pytest

import neardup
from neardup.errors import ConfigError

A = "the cat sat on the mat today and it was a very fine day indeed"
B = "the cat sat on the mat today and it was a very fine day indeed!"
C = "something else entirely different from the others in every way"


def test_pandas_kept_rows_are_the_users_own_rows_as_the_marks_give_them():
    df = pd.DataFrame({"text": [A, B, C], "meta": [{"a": 1}, {"a": 2}, {"b": 3}], 7: [[1, 2], [3], []]},
                      index=["x", "y", "z"])
    kept = neardup.dedup(df).kept
    marked = neardup.dedup(df, mark=True).kept
    want = df.loc[["x", "z"]]
    pd.testing.assert_frame_equal(kept, want)  # the dicts and the column named 7 as given, not via Arrow
    unmarked = marked[marked["duplicate_of"].isna()].drop(columns=["duplicate_of", "cluster", "similarity",
                                                                    "duplicate_reason"])
    pd.testing.assert_frame_equal(kept, unmarked)


def test_a_text_column_of_nulls_only_rejects_each_row():
    # a column of Arrow type null (every text None: a Ray Data block of None texts, written as its
    # own file) is a string column of nulls: each row rejected with its row, every document counted
    # (was one rejection of the whole table, row None, "input": 1 for 3 documents)
    res = neardup.dedup(pa.table({"text": pa.nulls(3)}), on_error="skip")
    assert res.stats["counts"]["input"] == 3 and res.stats["counts"]["rejected"] == 3
    assert res.rejected.column("row").to_pylist() == [0, 1, 2]
    assert set(res.rejected.column("reason").to_pylist()) == {"text field 'text' is null"}


@pytest.mark.parametrize("index", [pd.Index([1, "a", 2], dtype=object),
                                   pd.MultiIndex.from_tuples([(1, "a"), (1, "b"), (2, "a")])])
def test_an_index_arrow_cannot_hold_is_refused_in_one_line_before_any_work(index, monkeypatch):
    # its values are the ids given back with their type (result.removed["id"]): an index of mixed
    # types was pyarrow's "Could not convert 'a' with type str" after the whole run
    df = pd.DataFrame({"text": [A, B, C]}, index=index)
    monkeypatch.setattr("neardup.api.run", lambda *a, **k: pytest.fail("the run started"))
    with pytest.raises(ConfigError) as e:
        neardup.dedup(df)
    assert "index" in str(e.value) and "\n" not in str(e.value)


@pytest.mark.parametrize("make", [pa.table, pd.DataFrame])
def test_a_column_named_like_neardups_own_is_refused_not_dropped(make):
    # neardup adds a column of that name for a DataFrame's index and drops it from what it gives
    # back: a pyarrow table's own column of that name came back without it (a column lost, said
    # nowhere); a DataFrame's was refused as "column the index appears 2 times"
    from neardup.io.columns import INDEX_ID_COLUMN
    with pytest.raises(ConfigError) as e:
        neardup.dedup(make({"text": [A, B, C], INDEX_ID_COLUMN: ["p", "q", "r"]}))
    assert f"column named {INDEX_ID_COLUMN!r}" in str(e.value) and "\n" not in str(e.value)


def test_view_columns_come_back_with_their_rows_and_types(tmp_path):
    # string_view and binary_view columns (polars' to_arrow(compat_level=newest) gives them), alone
    # and inside a list and a struct: Arrow's take has no kernel for them; the kept rows, the marked
    # rows and kept/ come back with the types given (was ArrowNotImplementedError after the run)
    table = pa.table({"text": pa.array([A, B, C], pa.string_view()),
                      "raw": pa.array([b"a", b"b", b"c"], pa.binary_view()),
                      "tags": pa.array([["x"], [], None], pa.list_(pa.string_view())),
                      "meta": pa.array([{"k": "1"}, {"k": None}, None], pa.struct([("k", pa.string_view())]))})
    kept = neardup.dedup(table).kept
    assert kept.schema == table.schema
    assert kept.to_pylist() == [table.slice(0, 1).to_pylist()[0], table.slice(2, 1).to_pylist()[0]]
    marked = neardup.dedup(table, mark=True).kept
    assert marked.schema.names[:4] == table.schema.names and marked.schema.field("text").type == pa.string_view()
    assert marked.column("duplicate_of").to_pylist() == [None, "<table>:0", None]
    import pyarrow.parquet as pq
    neardup.dedup(table, output=str(tmp_path / "out"))
    written = pq.read_table(tmp_path / "out" / "kept" / "table.parquet")
    assert written.column("text").to_pylist() == [A, C]


def test_one_word_texts_ending_in_a_dot_are_texts_not_paths():
    # "Yes." has the extension "." by os.path.splitext: the list was read as paths ("no such file
    # or folder: Yes."); a bare dot is no extension
    res = neardup.dedup(["Yes.", "Yes.", "No."], threshold=0.5, ngram=1)
    assert res.stats["counts"]["input"] == 3 and res.kept == [0, 2]
    from neardup.io.inputs import looks_like_paths
    assert looks_like_paths(["a.jsonl", "b.parquet", "data/x"]) and not looks_like_paths(["ok!.", "a.b c"])
