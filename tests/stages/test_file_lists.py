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


def test_files_json_is_the_json_of_the_whole_lists(tmp_path):
    """files.json's text made a list at a time (write.files_json, write.InputEntries.encoded):
    the bytes of the sorted-keys dump of every entry's dict, whatever the names (quotes, escapes,
    not ASCII), the formats, the counts and the files skipped (their "skipped" key the last);
    stats.json keeps the first entries, as dicts. Mutation: "skipped" put after the closing piece
    of its entry instead of before -> fails."""
    from neardup.io.sources import Source
    from neardup.io.storage.folder import Folder, json_bytes
    names = ['a"b', "é\\x", "z\n", "q\u2603", "plain/file.txt"]
    sources = [Source(path="p", name=n, relpath="r", format=f)
               for n, f in zip(names, ["text", "jsonl", "csv", "text", "parquet"])]
    for skipped in ({}, {0: "empty file"}, {4: 'binary "x"'}, {1: "a", 2: "b"}):
        for counts in ([1, 2, 3, 0, 7], [0] * 5):
            entries = write.InputEntries(sources, counts, skipped)
            whole = {"inputs": list(entries), "kept_files": ["k\u00e9", 'x"y']}
            assert write.files_json({"inputs": entries, "kept_files": whole["kept_files"]}) == \
                json_bytes(whole, indent=None)
            assert entries[-1] == {"name": "plain/file.txt", "format": "parquet", "documents": counts[4],
                                   **({"skipped": skipped[4]} if 4 in skipped else {})}
    assert write.InputEntries([], [], {}).encoded() == "[]"
    out = Folder.of(str(tmp_path))
    stats = {"inputs": write.InputEntries(sources, [1] * 5, {3: "empty file"}), "kept_files": names}
    write.bound_lists(stats, out, limit=2)
    assert stats["inputs"] == list(write.InputEntries(sources, [1] * 5, {3: "empty file"}))[:2]
    assert json.loads((tmp_path / "files.json").read_text())["inputs"][3]["skipped"] == "empty file"
    short = {"inputs": write.InputEntries(sources, [1] * 5, {}), "kept_files": names}
    write.bound_lists(short, out, limit=10)  # (a limit over the run's): a plain list, as json dumps it
    assert type(short["inputs"]) is list and len(short["inputs"]) == 5
