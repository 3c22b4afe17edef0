"""The read stage's small work files written from arrays (``stages.read.array_bytes``): the
lines of a block and the stats of its files as the write stage reads them back, an empty array
(no file racily clean enough to record) included."""

import numpy as np

from neardup.io.storage.folder import Folder
from neardup.stages import write_lines
from neardup.stages.read import array_bytes, write_line_bounds
from neardup.stages.workdir import LINE_STATS, block_name


def test_array_bytes_of_any_shape():
    for a in (np.empty((0, 4), np.int64), np.arange(6, dtype=np.int64).reshape(2, 3).T,
              np.arange(5, dtype=np.uint32)[::2], np.arange(3, dtype=np.uint8)):
        assert bytes(array_bytes(a)) == a.tobytes()


def test_line_bounds_read_back(tmp_path):
    work = Folder(str(tmp_path))
    (tmp_path / "read").mkdir()
    lines = [np.array([[0, 9], [10, 19]], np.int64), np.array([[-1, -1]], np.int64), np.array([[20, 29]], np.int32)]
    write_line_bounds(work, 3, lines, np.empty((0, 4), np.int64))
    assert write_lines.block_lines(work, 3).tolist() == [[0, 9], [10, 19], [-1, -1], [20, 29]]
    assert (tmp_path / block_name(3, LINE_STATS)).read_bytes() == b""
    write_line_bounds(work, 4, lines[:1], np.array([[0, 1, 2, 30]]))
    assert np.frombuffer(work.read_bytes(block_name(4, LINE_STATS)), np.int64).tolist() == [0, 1, 2, 30]
    write_line_bounds(work, 5, lines[1:2], np.array([[0, 1, 2, 30]]))  # no line known: no files
    assert not (tmp_path / block_name(5, LINE_STATS)).exists()
