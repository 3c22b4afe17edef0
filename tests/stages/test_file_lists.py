"""stats.json stays bounded whatever the number of files: lists of input and kept files longer
than FILE_LIST_LIMIT go whole to files.json, and every reader of those lists (the result's kept
files, the check that kept/ holds only neardup's files before it is replaced) reads them whole."""

import json

import neardup
from neardup.stages import write

from helpers import run_in_process


def _texts(folder, n):
    folder.mkdir()
    for i in range(n):
        (folder / f"doc{i:02d}.txt").write_text(f"document number {i} says something of its own, word {i * 7}\n")
    (folder / "twin.txt").write_text("document number 0 says something of its own, word 0\n")


def test_long_file_lists_go_to_files_json_and_are_read_whole(tmp_path, monkeypatch):
    monkeypatch.setattr(write, "FILE_LIST_LIMIT", 4)
    _texts(tmp_path / "in", 9)
    out = tmp_path / "out"
    result = neardup.dedup(str(tmp_path / "in"), output=str(out))
    stats = json.loads((out / "stats.json").read_text())
    whole = json.loads((out / "files.json").read_text())
    assert len(stats["inputs"]) == 4 and len(stats["kept_files"]) == 4
    assert stats["lists"] == {"file": "files.json", "inputs": 10, "kept_files": 9}
    assert len(whole["inputs"]) == 10 and sorted(whole["kept_files"]) == sorted(p.name for p in (out / "kept").iterdir())
    assert len(result.kept) == 9  # the whole list, not stats.json's first entries
    # kept/ replaced by a second run: every file there is known as neardup's (files.json), none foreign
    ran = run_in_process("dedup", str(tmp_path / "in"), "--output", str(out), "--overwrite", "--quiet")
    assert ran.returncode == 0, ran.stderr
    # a short run after a long one: no files.json left over
    monkeypatch.setattr(write, "FILE_LIST_LIMIT", 1000)
    ran = run_in_process("dedup", str(tmp_path / "in"), "--output", str(out), "--overwrite", "--quiet")
    assert ran.returncode == 0, ran.stderr
    assert not (out / "files.json").exists() and "lists" not in json.loads((out / "stats.json").read_text())


def test_the_kept_files_of_a_run_on_paths_are_listed_when_used(tmp_path, monkeypatch):
    """The result's list of kept files (files.json read back, a path joined a file: 0.15 CPU-s
    at 100,000 files) is made when first used, once, not when the run ends: the command line
    never uses it. Mutation: the list made in _result -> read by the run."""
    monkeypatch.setattr(write, "FILE_LIST_LIMIT", 4)
    _texts(tmp_path / "in", 9)
    out = tmp_path / "out"
    listed = []
    real = write.full_list
    monkeypatch.setattr(write, "full_list", lambda *a: listed.append(a[2]) or real(*a))
    result = neardup.dedup(str(tmp_path / "in"), output=str(out))
    assert listed == []
    kept = result.kept
    assert listed == ["kept_files"]
    assert sorted(kept) == sorted(str(p) for p in (out / "kept").iterdir()) and len(kept) == 9
    assert result.kept is kept and listed == ["kept_files"]  # once
    result.kept = ["replaced"]
    assert result.kept == ["replaced"]
