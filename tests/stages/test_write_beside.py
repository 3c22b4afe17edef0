"""The write stage's members (removed.parquet and clusters.parquet: sorted, then stitched) are a
step run beside the kept/ calls (``beside=True``): in a Ray run's one worker process their calls
hold none of its CPUs, so that they run while kept/ is written, not after it (Ray's timeline of a
100k run: the members' four calls waited for the kept/ call's end, then ran one after another)."""

from __future__ import annotations

import json

from neardup import io as nio
from neardup.config import Config
from neardup.engines.local import LocalEngine
from neardup.io.storage.folder import Folder
from neardup.stages import Run
from neardup.stages.clusters import ClustersStage
from neardup.stages.pairs import PairsStage
from neardup.stages.read import ReadStage
from neardup.stages.workdir import WorkDir
from neardup.stages.write import WriteStage


class Recording(LocalEngine):
    """The local engine, each map's function and ``beside`` noted."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.maps = []

    def map(self, fn, items, **kwargs):
        self.maps.append((getattr(fn, "func", fn).__name__, kwargs.get("beside", False)))
        return super().map(fn, items, **kwargs)


def _write_stage_maps(tmp_path, **options):
    src = tmp_path / "in.jsonl"
    with open(src, "w") as f:
        for i in range(300):
            f.write(json.dumps({"id": f"d{i}", "text": f"document {i // 3} " + "shared words here " * 6}) + "\n")
    config = Config(id_column="id", **options).resolved()
    work = WorkDir(str(tmp_path / "work"), "beside-test")
    run = Run(config=config, sources=nio.discover([str(src)]), work=work, output=Folder.of(tmp_path / "out"),
              quiet=True)
    with Recording(workers=2) as engine:
        for stage in (ReadStage(), PairsStage(), ClustersStage()):
            work.mark_done(stage.name, stage.run(run, engine))
        engine.maps.clear()
        stats = WriteStage().run(run, engine)
    assert stats["counts"]["removed"] == 200
    return engine.maps


def test_the_members_run_beside_the_kept_calls(tmp_path):
    maps = _write_stage_maps(tmp_path)
    assert ("write_kept_partition", False) in maps
    members = [m for m in maps if m[0] != "write_kept_partition"]
    assert {name for name, _ in members} == {"member_rows", "write_ranges", "stitch_output"}
    assert all(beside for _, beside in members), maps


def test_marks_are_sorted_before_the_kept_calls_that_read_them(tmp_path):
    maps = _write_stage_maps(tmp_path, mark=True)
    assert maps.index(("write_ranges", False)) < maps.index(("write_kept_partition", False))
    assert ("stitch_output", True) in maps


def test_on_ray_a_step_beside_holds_none_of_the_one_worker_process_cpus():
    from neardup.engines.ray import RayEngine
    engine = RayEngine(workers=2)
    engine.cpus = engine.cpus_per_node = 2
    engine._runner = object()  # the run's one worker process (ray_runner): it counts the CPUs calls hold
    assert engine.map(len, [[1]]).share == 2
    assert engine.map(len, [[1]], beside=True).share == 0
    assert engine.map(len, [[1]], beside=True).threads == 2  # its kernel threads as before
    engine._runner = None  # plain Ray tasks: the scheduler's CPUs, as before
    assert engine.map(len, [[1]], beside=True).share == 2


def test_in_this_process_the_members_wait_for_the_copy_of_kept_lines_to_start(tmp_path, monkeypatch):
    """On the local engine the members' thread starts its work once the kernel copies the kept
    lines: before, its Python would hold the lock that the steps to the copy need. (The steps
    to the copy are slowed here: a thread not held would have sorted the members by then.)"""
    import time

    from neardup.io import kernel_copy
    from neardup.stages import write_lines

    events = []
    real_ranges, real_copy, real_map = write_lines.kept_ranges, kernel_copy.RangeCopier.copy, Recording.map

    def slow_ranges(*args):
        time.sleep(0.3)
        return real_ranges(*args)

    def copy(self, starts, ends):
        events.append("copy")
        return real_copy(self, starts, ends)

    def map(self, fn, items, **kwargs):
        events.append(getattr(fn, "func", fn).__name__)
        return real_map(self, fn, items, **kwargs)

    monkeypatch.setattr(write_lines, "kept_ranges", slow_ranges)
    monkeypatch.setattr(kernel_copy.RangeCopier, "copy", copy)
    monkeypatch.setattr(Recording, "map", map)
    _write_stage_maps(tmp_path)
    assert "copy" in events and "member_rows" in events
    assert events.index("copy") < events.index("member_rows"), events


def test_the_members_work_is_not_done_after_kept_fails(tmp_path, monkeypatch):
    """kept/ failing: the members' thread, held until the copy starts, is let go without its work
    (the staging folder is removed), and the error is kept/'s."""
    import pytest

    from neardup.stages import write

    done = []
    monkeypatch.setattr(write, "stitch_output", lambda *a, **k: done.append("stitched"))

    def fail(*args, **kwargs):
        raise OSError("disk full")

    monkeypatch.setattr(write, "write_kept_partition", fail)
    with pytest.raises(OSError, match="disk full"):
        _write_stage_maps(tmp_path)
    assert done == []
    gate = write._Gate()
    gate.open()
    gate.then(lambda: done.append("ran"))
    assert done == ["ran"]
