"""The Python files the readers wrap a stream in (:class:`neardup.io.forward_file.ForwardFile`):
read through ``pyarrow.PythonFile`` to the end, readable, not seekable, and closed with what they
read from."""

import bz2
import io

import pyarrow as pa
import pytest

from neardup.io._streams import _Limited
from neardup.io.compressed import StdlibReader
from neardup.io.formats.csv import _CSV_TAIL, _EndMarked

DATA = b"a,b\n1,2\n3,4\n"


class _Raw(io.BytesIO):
    """A byte stream that remembers being closed."""

    was_closed = False

    def close(self):
        self.was_closed = True
        super().close()


@pytest.mark.parametrize("make, stored, want", [
    (lambda raw: StdlibReader(raw, "bz2"), bz2.compress(DATA), DATA),
    (lambda raw: _EndMarked(raw, 6), DATA, DATA[:6] + _CSV_TAIL.encode()),
    (lambda raw: _Limited(raw, 6), DATA, DATA[:6]),
])
def test_a_forward_file_reads_to_the_end_and_closes_what_it_reads(make, stored, want):
    """Mutations: ForwardFile.seekable -> True; ``super().close()`` left out of a subclass's
    close -> not closed; the StdlibReader's ``self.raw.close()`` left out -> its stream open."""
    raw = _Raw(stored)
    f = make(raw)
    assert f.readable() and not f.seekable() and not f.closed
    stream = pa.PythonFile(f, mode="r")
    assert b"".join(iter(lambda: stream.read(5), b"")) == want  # in reads of 5 bytes, as pyarrow reads
    f.close()
    assert f.closed
    if not isinstance(f, _EndMarked):  # the CSV end marker leaves its stream to its caller
        assert raw.was_closed
