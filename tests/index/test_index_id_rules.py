"""One id, one document, in an index (issue 29): the ids of every add by one rule, whatever the
entry point (``neardup index add``, :meth:`Index.add`, :meth:`Index.remove`): positional ids
name each file as the add names it (two dumps of one layout do not share ids), a repeated id is
refused (within an add or against the index's live documents), ids are strings or integers,
never ``"None"`` or ``"True"``; an ``--ids`` file with a byte-order mark loses no id."""

from __future__ import annotations

import json

import pytest

from neardup.errors import ConfigError, InputError
from neardup.index import Index

from helpers import run_in_process as neardup

WORDS = [" ".join(f"{tag}{i}" for i in range(60)) for tag in ("a", "b", "c", "d")]


def dump(folder, texts):
    """A folder dump: part-0001.jsonl (no ids) and a text file NEWS, the layout of every dump."""
    folder.mkdir()
    (folder / "part-0001.jsonl").write_text("".join(json.dumps({"text": t}) + "\n" for t in texts))
    (folder / "NEWS").write_text(texts[0] + " news")


def test_two_folder_dumps_indexed_in_turn_keep_distinct_ids(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    dump(tmp_path / "dump1", WORDS[:3])
    dump(tmp_path / "dump2", WORDS[1:4])
    for d in ("dump1", "dump2"):
        ran = neardup("index", "add", "idx", d + "/")
        assert ran.returncode == 0, ran.stderr
    idx = Index("idx")
    ids = sorted(m.id for r in idx.query(WORDS) for m in r)
    # the rule: SOURCE:LINE, the file as the add named it
    assert "dump1/part-0001.jsonl:2" in ids and "dump2/part-0001.jsonl:1" in ids
    # the shared name of both dumps names no document; the stated id of one names exactly one
    (tmp_path / "ids.txt").write_text("part-0001.jsonl:3\nNEWS\n")
    ran = neardup("index", "remove", "idx", "--ids", "ids.txt")
    assert ran.returncode == 0, ran.stderr
    assert "removed 0 documents" in ran.stdout + ran.stderr, ran.stdout + ran.stderr
    (tmp_path / "ids.txt").write_text("dump1/part-0001.jsonl:3\ndump2/NEWS\n")
    r = Index("idx").remove(ids=["dump1/part-0001.jsonl:3", "dump2/NEWS"])
    assert (r["removed"], r["ids_found"]) == (2, 2)
    left = {m.id for q in Index("idx").query(WORDS + [WORDS[1] + " news"]) for m in q}
    assert "dump1/part-0001.jsonl:3" not in left and "dump2/part-0001.jsonl:2" in left
    assert "dump2/NEWS" not in left and "dump1/NEWS" in left


def test_with_a_name_positional_ids_are_name_slash_file(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    dump(tmp_path / "dump1", WORDS[:3])
    ran = neardup("index", "add", "idx", "dump1/", "--name", "jan")
    assert ran.returncode == 0, ran.stderr
    assert {m.id for r in Index("idx").query(WORDS[:3]) for m in r} >= {"jan/part-0001.jsonl:1", "jan/NEWS"}


def test_the_same_ids_added_twice_are_refused_and_nothing_is_added(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    dump(tmp_path / "dump1", WORDS[:3])
    assert neardup("index", "add", "idx", "dump1/").returncode == 0
    docs = Index("idx").stats()["documents"]
    ran = neardup("index", "add", "idx", "dump1/")
    assert ran.returncode == 2 and "already the id of a document" in ran.stderr and "--name" in ran.stderr
    assert len(ran.stderr.strip().splitlines()) == 1
    assert Index("idx").stats()["documents"] == docs
    # a removed document's id may come back
    Index("idx").remove(ids=["dump1/NEWS"])
    Index("idx").add([WORDS[0] + " news"], ids=["dump1/NEWS"], name="again")


def test_index_add_refuses_what_dedup_refuses(tmp_path):
    idx = Index(str(tmp_path / "idx"))
    with pytest.raises(InputError, match="duplicate id 'x'"):
        idx.add(WORDS[:2], ids=["x", "x"])
    with pytest.raises(InputError, match="duplicate id '1'"):
        idx.add(WORDS[:2], ids=[1, "1"])  # compared as text, as in an id field
    with pytest.raises(ConfigError, match="an id is None"):
        idx.add(WORDS[:2], ids=["a", None])
    with pytest.raises(ConfigError, match="an id is True"):
        idx.add(WORDS[:2], ids=["a", True])
    with pytest.raises(InputError, match="line break"):
        idx.add(WORDS[:1], ids=["two\nlines"])
    assert not (tmp_path / "idx" / "segments").exists() or not any((tmp_path / "idx" / "segments").iterdir())
    idx.add(WORDS[:2], ids=[7, "eight"])  # an integer is its digits
    assert [m.id for m in idx.query([WORDS[0]])[0]] == ["7"]
    # a second add of texts without ids: their positions ("0", "1", ...) repeat
    idx.add(WORDS[2:3])
    with pytest.raises(InputError, match="'0' of '<texts>' is already the id"):
        idx.add(WORDS[3:4])
    r = idx.remove(ids=[7])  # raised ArrowTypeError
    assert (r["removed"], r["ids_found"]) == (1, 1)


def test_an_ids_file_with_a_byte_order_mark_loses_no_id(tmp_path):
    idx = Index(str(tmp_path / "idx"))
    idx.add(WORDS[:2], ids=["first", "second"])
    ids = tmp_path / "ids.txt"
    ids.write_bytes("\ufefffirst\nsecond\n".encode("utf-8"))
    ran = neardup("index", "remove", str(tmp_path / "idx"), "--ids", str(ids))
    assert ran.returncode == 0, ran.stderr
    assert Index(str(tmp_path / "idx")).query(WORDS[:2]) == [[], []]


def test_an_empty_id_is_refused_like_a_line_break(tmp_path):
    """``index remove --ids FILE`` skips blank lines, so a document whose id is "" could never be
    removed by id (the takedown of it said "0 of 0 ids found", exit 0): refused at the add, in
    one line, nothing added, as an id holding a line break is."""
    data = tmp_path / "d.jsonl"
    data.write_text("".join(json.dumps({"id": i, "text": t}) + "\n" for i, t in zip(["", "b"], WORDS)))
    ran = neardup("index", "add", str(tmp_path / "idx"), str(data))
    assert ran.returncode == 2 and "empty" in ran.stderr and len(ran.stderr.strip().splitlines()) == 1, ran
    assert Index(str(tmp_path / "idx")).storage.read_manifest() is None
    with pytest.raises(InputError, match="empty"):
        Index(str(tmp_path / "idx")).add(WORDS[:1], ids=[""])


def test_add_arrays_takes_ids_by_the_same_rule(tmp_path):
    import numpy as np
    idx = Index(str(tmp_path / "idx"), verify="estimate")
    bands, k = idx.config.bands, idx.config.num_perm
    keys = np.arange(2 * bands, dtype=np.uint64).reshape(2, bands)
    sig = np.zeros((2, k), np.uint32)
    with pytest.raises(ConfigError, match="an id is None"):
        idx.add_arrays(keys, [None, "b"], "s", signatures=sig)
    with pytest.raises(InputError, match="duplicate id '3'"):
        idx.add_arrays(keys, [3, "3"], "s", signatures=sig)
    idx.add_arrays(keys, [3, 4], "s", signatures=sig)  # raised ArrowTypeError
    assert idx.remove(ids=[4])["removed"] == 1


def test_against_an_index_of_the_previous_dump_names_the_indexed_document(tmp_path, monkeypatch):
    # "ABOUT-NLS removed for ABOUT-NLS": the indexed document had the run's own id
    monkeypatch.chdir(tmp_path)
    dump(tmp_path / "dump1", WORDS[:3])
    dump(tmp_path / "dump2", WORDS[:3])
    assert neardup("index", "add", "idx", "dump1/").returncode == 0
    ran = neardup("dedup", "dump2/", "-o", "out", "--against", "idx", "--quiet")
    assert ran.returncode == 0, ran.stderr
    import pyarrow.parquet as pq
    rows = pq.read_table("out/removed.parquet").to_pylist()
    news = next(r for r in rows if r["id"] == "NEWS")
    assert news["representative"] == "dump1/NEWS" and news["representative_source"] == "dump1/NEWS"
