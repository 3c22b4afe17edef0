"""kept/ of a folder of many text files: one group of files a core, not four (fewer pools of copy
threads started), the same files; other inputs, or --mark, keep four groups a core."""

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


def test_text_files_copied_whole_are_one_group_a_core_the_same_files(tmp_path, monkeypatch):
    """Mutation: ``per_core = 1 if ...`` -> ``per_core = 4 if ...`` (the spy sees 8 groups)."""
    _texts(tmp_path / "in", 30)
    seen = _groups_of_kept_writes(monkeypatch)
    neardup.dedup(str(tmp_path / "in"), output=str(tmp_path / "per_core"), workers=2)
    monkeypatch.setattr(write, "text_copied_whole", lambda *a: False)
    neardup.dedup(str(tmp_path / "in"), output=str(tmp_path / "four_a_core"), workers=2)
    assert seen == [(2, 2), (8, 2)]
    per_core, four_a_core = _kept(tmp_path / "per_core"), _kept(tmp_path / "four_a_core")
    assert len(per_core) == 30 and per_core == four_a_core
    for name in ("removed.parquet", "clusters.parquet"):
        assert (tmp_path / "per_core" / name).read_bytes() == (tmp_path / "four_a_core" / name).read_bytes()


def test_other_files_or_marks_keep_four_groups_a_core(tmp_path, monkeypatch):
    _texts(tmp_path / "in", 30)
    (tmp_path / "in" / "more.jsonl").write_text('{"text": "a line of its own, not a copy of any"}\n')
    seen = _groups_of_kept_writes(monkeypatch)
    neardup.dedup(str(tmp_path / "in"), output=str(tmp_path / "mixed"), workers=2)
    (tmp_path / "in" / "more.jsonl").unlink()
    neardup.dedup(str(tmp_path / "in"), output=str(tmp_path / "marked"), mark=True, workers=2)
    assert seen == [(8, 2), (8, 2)]
