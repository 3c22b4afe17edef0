"""The compiled copy of whole files given each file's size as the walk found it
(:func:`neardup.kernels.filecopy.copy_files`, ``sizes``): one ``sendfile`` a file asks for one
byte more than that size, and a file that grew or shrank since (or whose size is not known) is
copied whole all the same."""

from __future__ import annotations

import os
import sys

import numpy as np
import pytest

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the compiled loops of files: Linux")


def test_files_whose_size_changed_since_the_walk_are_copied_whole(tmp_path):
    from neardup.kernels.filecopy import copy_files, files_available

    if not files_available():
        pytest.skip("no compiled copy here")
    texts = [b"same size", b"grew by one byte", b"grew a lot " * 300, b"shrank", b"was empty", b"",
             b"size not known", b"x" * (3 << 20)]
    walked = [9, 15, 10, 100, 0, 0, -1, 5]  # what the walk found; the files are ``texts`` now
    names, outs = [], []
    for k, text in enumerate(texts):
        (tmp_path / f"{k}.txt").write_bytes(text)
        names.append(os.fsencode(tmp_path / f"{k}.txt"))
        outs.append(os.fsencode(tmp_path / f"{k}.out"))
    raw = names + outs
    blob = np.frombuffer(b"\0".join(raw) + b"\0", np.uint8)
    at = np.cumsum([0] + [len(p) + 1 for p in raw[:-1]]).astype(np.int64)
    n = len(texts)
    done, copied = copy_files(blob, at[:n], at[n:], os.O_RDONLY | os.O_CLOEXEC,
                              os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o666, np.array(walked))
    assert done == n
    assert [(tmp_path / f"{k}.out").read_bytes() for k in range(n)] == texts
    assert copied == sum(map(len, texts))


def test_the_write_stage_gives_the_copy_the_sizes_the_run_found():
    from neardup.stages.write import walked_sizes

    inputs = [["in/0.txt", "in/0.txt", 12, 7], ["t", "table", 40], ["in/2.txt", "in/2.txt", 3, 9],
              ["in/3.md", "in/3.md", 5, 1]]
    assert walked_sizes(inputs, [0, 1, 2]) == [12, -1, 3]
    assert walked_sizes(None, [0, 2]) is None


def test_a_run_copies_each_kept_text_file_with_the_size_it_found(tmp_path, monkeypatch):
    """Mutation: ``copy_sizes.append(sizes[k] if ...)`` -> ``copy_sizes.append(-1)`` (no size known)."""
    import neardup
    from neardup.io.formats import text as text_format

    (tmp_path / "in" / "a").mkdir(parents=True)
    for i in range(20):
        (tmp_path / "in" / "a" / f"{i:02d}.txt").write_text(f"document {i} " + "word " * i + f"end {i * 13}\n")
    seen = {}
    real = text_format._copy_compiled

    def spy(loop, items, sizes):
        seen.update(zip([src.path for src, _ in items], sizes))
        return real(loop, items, sizes)

    monkeypatch.setattr(text_format, "_copy_compiled", spy)
    neardup.dedup(str(tmp_path / "in"), output=str(tmp_path / "out"), workers=2)
    assert len(seen) == 20
    assert seen == {path: os.path.getsize(path) for path in seen}
    assert sorted(p.name for p in (tmp_path / "out" / "kept").rglob("*.txt")) == [f"{i:02d}.txt" for i in range(20)]
