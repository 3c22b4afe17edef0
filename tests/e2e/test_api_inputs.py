"""What the Python API takes and gives back, on the inputs a user holds (tables, DataFrames)."""

from __future__ import annotations

import pandas as pd
import pyarrow as pa

import neardup

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
