"""neardup.stages.preload.later_kernels: a run loads ahead only the kernels it will call."""

from __future__ import annotations

import gzip
import json
from types import SimpleNamespace

from neardup import io as nio
from neardup.config import Config
from neardup.io.storage.folder import Folder
from neardup.stages.preload import LATER_KERNELS, later_kernels

NEWLINES = ("neardup.kernels.lines", "_newlines")


def _run(tmp_path, inputs, **options):
    return SimpleNamespace(sources=nio.discover([str(p) for p in inputs]), config=Config(**options).resolved(),
                           output=Folder.of(tmp_path / "out"))


def _jsonl(path, opener=open):
    with opener(path, "wt") as f:
        f.write("".join(json.dumps({"id": str(i), "text": f"document {i}"}) + "\n" for i in range(5)))
    return path


def test_newlines_is_loaded_ahead_only_for_a_run_that_finds_lines(tmp_path, monkeypatch):
    """A JSONL file read by the scanner (its spans are the lines) and copied from those lines
    calls _newlines nowhere; read by pyarrow, gzipped, or written marked, it does; a folder of
    text files never does. The other kernels are always loaded ahead."""
    plain = _jsonl(tmp_path / "a.jsonl")
    packed = _jsonl(tmp_path / "b.jsonl.gz", gzip.open)
    (tmp_path / "texts").mkdir()
    (tmp_path / "texts" / "t.txt").write_text("a text file")
    others = [k for k in LATER_KERNELS if k != NEWLINES]
    monkeypatch.setenv("NEARDUP_JSONL_SCANNER", "1")
    assert list(later_kernels(_run(tmp_path, [plain]))) == others
    assert list(later_kernels(_run(tmp_path, [tmp_path / "texts"]))) == others
    assert NEWLINES in later_kernels(_run(tmp_path, [plain, packed]))
    assert NEWLINES in later_kernels(_run(tmp_path, [plain], mark=True))
    monkeypatch.setenv("NEARDUP_JSONL_SCANNER", "0")
    assert list(later_kernels(_run(tmp_path, [plain]))) == list(LATER_KERNELS)
