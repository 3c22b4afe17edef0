"""kept/ of a folder of many text files: one group of files in this process (one pool of copy
threads), one a core on an engine elsewhere, not four, the same files; other inputs, or --mark,
keep four groups a core. The thread beside kept/ runs while the files are copied."""

import threading

import neardup
from neardup.engines.local import LocalEngine
from neardup.stages import write


def _texts(folder, n):
    folder.mkdir()
    for i in range(n):
        (folder / f"doc{i:02d}.txt").write_text(f"document number {i} says something of its own, word {i * 7}\n")
    for i in range(0, n, 5):
        (folder / f"twin{i:02d}.txt").write_text(f"document number {i} says something of its own, word {i * 7}\n")


def _kept(out):
    return {p.name: p.read_bytes() for p in (out / "kept").iterdir()}


def _groups_of_kept_writes(monkeypatch):
    seen = []
    real = LocalEngine.map

    def spy(self, fn, items, **kw):
        if getattr(fn, "func", None) is write.write_kept_partition:
            items = list(items)
            seen.append((len(items), self.cpus))
        return real(self, fn, items, **kw)

    monkeypatch.setattr(LocalEngine, "map", spy)
    return seen


def test_text_files_copied_whole_are_one_group_in_process_the_same_files(tmp_path, monkeypatch):
    """One group in this process, one a core where the engine runs elsewhere (``in_process``
    False), four a core for other files: the same kept/ and member files.
    Mutation: ``calls = 1 if whole_text and engine.in_process else ...`` -> ``calls = (1 if
    whole_text else 4) * engine.cpus`` (the spy sees 2 groups in this process) fails."""
    _texts(tmp_path / "in", 30)
    seen = _groups_of_kept_writes(monkeypatch)
    neardup.dedup(str(tmp_path / "in"), output=str(tmp_path / "one"), workers=2)
    with monkeypatch.context() as m:
        m.setattr(LocalEngine, "in_process", False)
        neardup.dedup(str(tmp_path / "in"), output=str(tmp_path / "per_core"), workers=2)
    monkeypatch.setattr(write, "text_copied_whole", lambda *a: False)
    neardup.dedup(str(tmp_path / "in"), output=str(tmp_path / "four_a_core"), workers=2)
    assert seen == [(1, 2), (2, 2), (8, 2)]
    outs = [tmp_path / d for d in ("one", "per_core", "four_a_core")]
    kept = [_kept(o) for o in outs]
    assert len(kept[0]) == 30 and kept[0] == kept[1] == kept[2]
    for name in ("removed.parquet", "clusters.parquet"):
        assert len({(o / name).read_bytes() for o in outs}) == 1


def test_text_files_copied_whole_in_groups_of_at_most_text_group_files(tmp_path, monkeypatch):
    """Mutation: ``max(1, math.ceil(len(files) / TEXT_GROUP_FILES))`` -> ``1`` (one group) fails."""
    _texts(tmp_path / "in", 30)
    seen = _groups_of_kept_writes(monkeypatch)
    neardup.dedup(str(tmp_path / "in"), output=str(tmp_path / "one"), workers=2)
    monkeypatch.setattr(write, "TEXT_GROUP_FILES", 10)
    neardup.dedup(str(tmp_path / "in"), output=str(tmp_path / "groups"), workers=2)
    assert seen == [(1, 2), (4, 2)]  # 36 files: 4 groups of 9
    assert _kept(tmp_path / "one") == _kept(tmp_path / "groups")


def test_members_written_while_text_files_are_copied(tmp_path, monkeypatch):
    """removed.parquet and clusters.parquet (the write stage's thread beside kept/) are made
    while the text files are copied whole, not after: the copy waits here until the members'
    first step has run (before, the thread waited for the copy's end: the wait timed out).
    Mutation: ``started()`` not called in copy_text_group fails (the wait times out)."""
    _texts(tmp_path / "in", 30)
    beside = threading.Event()
    real_rows, real_copy = write.member_rows, write.nio.copy_text_files

    def rows(*a, **k):
        beside.set()
        return real_rows(*a, **k)

    waited = []

    def copy(*a, **k):
        waited.append(beside.wait(10))
        return real_copy(*a, **k)

    monkeypatch.setattr(write, "member_rows", rows)
    monkeypatch.setattr(write.nio, "copy_text_files", copy)
    neardup.dedup(str(tmp_path / "in"), output=str(tmp_path / "out"), workers=2)
    assert waited == [True]
    assert len(_kept(tmp_path / "out")) == 30


def test_other_files_or_marks_keep_four_groups_a_core(tmp_path, monkeypatch):
    _texts(tmp_path / "in", 30)
    (tmp_path / "in" / "more.jsonl").write_text('{"text": "a line of its own, not a copy of any"}\n')
    seen = _groups_of_kept_writes(monkeypatch)
    neardup.dedup(str(tmp_path / "in"), output=str(tmp_path / "mixed"), workers=2)
    (tmp_path / "in" / "more.jsonl").unlink()
    neardup.dedup(str(tmp_path / "in"), output=str(tmp_path / "marked"), mark=True, workers=2)
    assert seen == [(8, 2), (8, 2)]


def test_text_files_kept_found_in_arrays_are_those_kept_one_by_one(tmp_path, monkeypatch):
    """copy_text_group (the files that keep their document found by write.text_files_kept) against
    write_kept_group's file-by-file tests: the same kept/, counts and lists, with removed twins,
    an empty file (an empty document, kept) and a binary one (no document: not copied), in groups
    of several blocks.
    Mutation: ``alive = ~np.isin(...)`` -> ``np.isin(...)`` (the removed files kept) fails."""
    import json
    _texts(tmp_path / "in", 40)
    (tmp_path / "in" / "empty.txt").write_text("")
    (tmp_path / "in" / "binary.txt").write_bytes(b"\x00\x01 not text")
    from neardup.stages import workdir
    monkeypatch.setattr(workdir, "BLOCK_BYTES", 400)  # blocks of a few files
    calls = []
    real = write.copy_text_group
    monkeypatch.setattr(write, "copy_text_group", lambda *a, **k: calls.append(1) or real(*a, **k))
    neardup.dedup(str(tmp_path / "in"), output=str(tmp_path / "arrays"), workers=2)
    monkeypatch.setattr(write, "text_copied_whole", lambda *a: False)
    neardup.dedup(str(tmp_path / "in"), output=str(tmp_path / "one_by_one"), workers=2)
    assert len(calls) == 1  # the first run only, one group in this process
    arrays, one_by_one = _kept(tmp_path / "arrays"), _kept(tmp_path / "one_by_one")
    assert arrays == one_by_one and len(arrays) == 41 and "empty.txt" in arrays and "binary.txt" not in arrays
    stats = [json.loads((tmp_path / d / "stats.json").read_text()) for d in ("arrays", "one_by_one")]
    for s in stats:
        s.pop("seconds")
    assert stats[0] == stats[1] and stats[0]["counts"]["kept"] == 41 and stats[0]["counts"]["removed"] == 8


def test_blocks_of_sources_a_block_each_or_a_split_files_blocks():
    """Each source's blocks in order: one shared list a block where no source lies in two, the
    loop's lists where one does (a split file's ranges).
    Mutation: ``if len(block_of) == sum(map(len, plan))`` -> ``if True`` (source 2 gets [3]) fails."""
    one = write.blocks_of_sources([[0, 1, 2], [3, 4], [5]])
    assert one == {0: [0], 1: [0], 2: [0], 3: [1], 4: [1], 5: [2]}
    assert one[0] is one[2]  # a block's list, shared (read only)
    assert write.blocks_of_sources([[0, 1], [2], [2], [2, 3]]) == {0: [0], 1: [0], 2: [1, 2, 3], 3: [3]}
    assert write.blocks_of_sources([]) == {}
