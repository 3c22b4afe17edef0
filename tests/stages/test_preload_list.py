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


def test_the_read_stages_kernels_are_those_its_input_and_options_call(tmp_path, monkeypatch):
    """read_kernels: the scanner's kernels for a JSONL file it reads (its ids' with an id
    column), the MinHash kernel for texts, the codes' with --verify exact, the band keys always;
    in the order a map thread calls them."""
    from neardup.stages.preload import (BAND_KERNELS, CODE_KERNELS, MINHASH_KERNELS, SCANNER_ID_KERNELS,
                                        SCANNER_KERNELS, read_kernels)
    plain = _jsonl(tmp_path / "a.jsonl")
    (tmp_path / "texts").mkdir()
    (tmp_path / "texts" / "t.txt").write_text("a text file")
    monkeypatch.setenv("NEARDUP_JSONL_SCANNER", "1")
    assert read_kernels(_run(tmp_path, [plain], id_column="id")) == (SCANNER_KERNELS + SCANNER_ID_KERNELS
                                                                     + MINHASH_KERNELS + CODE_KERNELS + BAND_KERNELS)
    assert read_kernels(_run(tmp_path, [plain])) == SCANNER_KERNELS + MINHASH_KERNELS + CODE_KERNELS + BAND_KERNELS
    assert read_kernels(_run(tmp_path, [plain], id_column="id", verify="estimate")) == (
        SCANNER_KERNELS + SCANNER_ID_KERNELS + MINHASH_KERNELS + BAND_KERNELS)
    assert read_kernels(_run(tmp_path, [tmp_path / "texts"])) == MINHASH_KERNELS + CODE_KERNELS + BAND_KERNELS
    monkeypatch.setenv("NEARDUP_JSONL_SCANNER", "0")  # pyarrow reads it: no scanner kernel is called
    assert read_kernels(_run(tmp_path, [plain])) == MINHASH_KERNELS + CODE_KERNELS + BAND_KERNELS


def test_signature_files_call_no_minhash_kernel(tmp_path):
    """A run over signature files (no texts) calls the band keys' kernel alone of the read's."""
    import neardup
    from neardup.stages.preload import BAND_KERNELS, read_kernels
    sigs = tmp_path / "sigs"
    neardup.signatures(str(_jsonl(tmp_path / "a.jsonl")), output=str(sigs))
    run = SimpleNamespace(sources=nio.discover([str(sigs)], input_format="signatures"),
                          config=Config().resolved(), output=Folder.of(tmp_path / "out"))
    assert [s.format for s in run.sources] == ["signatures"]
    assert read_kernels(run) == BAND_KERNELS
