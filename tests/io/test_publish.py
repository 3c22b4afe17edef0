"""Folder.publish: the result in a staging folder replaces the one in the output, the old result
moved into the staging folder's OLD by renames (its bytes unlinked later, beside the work dir's
removal: neardup.run), and a run leaves neither behind."""

from __future__ import annotations

import json
import os

import neardup
from neardup.io.storage.folder import OLD, Folder


def _put(path, data: bytes) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as fh:
        fh.write(data)


def test_publish_renames_the_old_result_into_staging(tmp_path):
    out = Folder.of(str(tmp_path / "out"))
    staging = out.child(".neardup-staging")
    _put(out.join("kept", "a.jsonl"), b"old kept\n")
    _put(out.join("removed.parquet"), b"old removed")
    _put(out.join("report.html"), b"old report")
    _put(out.join("stats.json"), b"{}")
    _put(staging.join("kept", "b.jsonl"), b"new kept\n")
    _put(staging.join("removed.parquet"), b"new removed")
    old_inode = os.stat(out.join("kept", "a.jsonl")).st_ino
    names = ("kept", "removed.parquet", "report.html", "stats.json")
    out.publish(staging, names, "stats.json", lambda: b'{"new": 1}')
    assert sorted(os.listdir(out.path)) == [".neardup-staging", "kept", "removed.parquet", "stats.json"]
    assert os.listdir(out.join("kept")) == ["b.jsonl"]
    assert (open(out.join("removed.parquet"), "rb").read(), open(out.join("stats.json"), "rb").read()) == \
        (b"new removed", b'{"new": 1}')
    # the old result, whole, in the staging folder: moved (the same file), not copied nor unlinked yet
    old = staging.child(OLD)
    assert sorted(os.listdir(old.path)) == ["kept", "removed.parquet", "report.html"]
    assert os.stat(old.join("kept", "a.jsonl")).st_ino == old_inode
    assert open(old.join("report.html"), "rb").read() == b"old report"


def test_a_run_over_an_old_result_leaves_no_staging_folder(tmp_path):
    corpus = tmp_path / "c.jsonl"
    out = tmp_path / "out"
    for words in ("one two three four five six", "seven eight nine ten eleven twelve"):
        corpus.write_text("".join(json.dumps({"id": str(i), "text": f"{words} {i}"}) + "\n" for i in range(20)))
        neardup.dedup(str(corpus), output=str(out), overwrite=True)
    assert not (out / ".neardup-staging").exists()
    assert "seven" in (out / "kept" / "c.jsonl").read_text()
