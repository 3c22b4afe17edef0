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


def test_the_write_stage_gives_the_copy_the_sizes_of_the_text_files_the_run_found():
    from neardup.io.sources import make_source
    from neardup.stages.write import walked_sizes

    sources = [make_source(f"in/{k}.{ext}", f"in/{k}.{ext}", f"{k}.{ext}", fmt, None, True)
               for k, (ext, fmt) in enumerate([("txt", "text"), ("jsonl", "jsonl"), ("txt", "text"), ("md", "text")])]
    inputs = [["in/0.txt", "in/0.txt", 12, 7], ["in/1.jsonl", "in/1.jsonl", 40, 8],
              ["in/2.txt", "in/2.txt", 3, 9], ["in/3.md", "in/3.md", 5, 1]]
    assert walked_sizes(inputs, sources, [0, 1, 2]) == {"in/0.txt": (12, 7), "in/2.txt": (3, 9)}
    assert walked_sizes(None, sources, [0, 2]) == {}
