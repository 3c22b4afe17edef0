"""The kept rows of a table's record batches (:func:`neardup.io.kept_rows.kept_batches`), which the
CSV / TSV and Parquet writers of kept records share: the same rows, the same errors for both."""

import numpy as np
import pyarrow as pa
import pytest

from neardup.errors import InputError
from neardup.io.kept_rows import kept_batches


def _batches(sizes, error=None):
    """Record batches of ``sizes`` rows (column ``r``: the row's number), then ``error`` raised."""
    row0 = 0
    for n in sizes:
        yield pa.RecordBatch.from_pydict({"r": list(range(row0, row0 + n))})
        row0 += n
    if error is not None:
        raise error


SIZES = [2, 3, 0, 4, 2]


@pytest.mark.parametrize("keep", [[], [0], [2, 3, 4], [0, 1, 5, 6, 7, 8, 9, 10], [10], [4, 9]])
def test_the_kept_rows_in_order_a_batch_whole_where_all_are_kept(keep):
    """Mutations: every batch taken (``rb if ... else`` -> ``rb.take``) -> not the batch itself;
    the batches read to the end (``while k < len(keep)`` -> ``while True``) -> more pulled."""
    batches = list(_batches(SIZES))
    pulled = []

    def reader():
        for rb in batches:
            pulled.append(rb)
            yield rb

    got = list(kept_batches(reader(), np.array(keep, dtype=np.int64), "x", "CSV"))
    assert [r for rb in got for r in rb.column("r").to_pylist()] == keep
    ends = np.cumsum(SIZES)
    assert len(pulled) == (int(np.searchsorted(ends, keep[-1], side="right")) + 1 if keep else 0)
    whole = {id(rb) for rb in batches if rb.num_rows and set(rb.column("r").to_pylist()) <= set(keep)}
    assert whole <= {id(rb) for rb in got}


@pytest.mark.parametrize("error", [ValueError("bad value"), OSError("bad disk"), pa.ArrowInvalid("bad bytes")])
@pytest.mark.parametrize("kind", ["CSV", "Parquet"])
def test_a_reader_error_is_an_input_error_that_says_after_which_row(error, kind):
    """The same errors for both formats (the CSV writer once let a reader's plain ValueError out
    as it was). Mutation: ValueError left out of the errors caught -> the ValueError escapes."""
    with pytest.raises(InputError, match=rf"^x: not a readable {kind} file \(after row 5: bad \w+\)$"):
        list(kept_batches(_batches([2, 3], error), np.array([1, 7]), "x", kind))


def test_a_kept_row_past_the_end_is_a_value_error():
    with pytest.raises(ValueError, match=r"^keep_rows has row 7 but x has 5 rows$"):
        list(kept_batches(_batches([2, 3]), np.array([1, 7]), "x", "Parquet"))
