"""The write stage's members: removed.parquet and clusters.parquet sorted by range in the engine's
calls and stitched from the sorted parts (:func:`neardup.stages.write.write_members`), the
kept/ writers finding their removed rows in those parts: the same rows in the same order, the
same bytes, however many ranges."""

import json
import os

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from neardup import io as nio
from neardup.config import Config
from neardup.engines.local import LocalEngine
from neardup.io.storage.folder import Folder
from neardup.io.storage.tables import ROW_GROUP, stitch_parquet, write_arrow, write_parquet
from neardup.stages import Run
from neardup.stages.clusters import ClustersStage
from neardup.stages.pairs import PairsStage
from neardup.stages.read import ReadStage
from neardup.stages.workdir import WorkDir, stage_files
from neardup.stages.write import WriteStage, cluster_records, removed_records

EXAMPLE = os.path.join(os.path.dirname(__file__), "..", "..", "examples", "corpus.jsonl")


def test_stitched_parts_are_the_bytes_of_the_rows_written_at_once(tmp_path):
    """Parts of any sizes (row groups or batches of their own, Parquet or Arrow IPC) stitched in
    order: the bytes of the whole table written at once, row groups of exactly ROW_GROUP rows;
    ``convert`` batch by batch."""
    n = ROW_GROUP * 2 + 321
    table = pa.table({"id": pa.array([f"doc-{i}" for i in range(n)]), "x": pa.array(np.arange(n, dtype=np.int64))})
    write_parquet(table, str(tmp_path / "whole.parquet"))
    parts = []
    start = 0
    for i, size in enumerate([1, ROW_GROUP + 7, 0, 5000, n - 1 - ROW_GROUP - 7 - 5000]):
        if i % 2:  # Arrow IPC, as the work dir's parts, in batches of up to ROW_GROUP rows
            path = str(tmp_path / f"part-{i}.arrow")
            write_arrow(table.slice(start, size), path, max_chunksize=ROW_GROUP)
        else:
            path = str(tmp_path / f"part-{i}.parquet")
            write_parquet(table.slice(start, size), path)
        parts.append(path)
        start += size
    assert stitch_parquet(str(tmp_path / "stitched.parquet"), table.schema, parts) == n
    assert (tmp_path / "stitched.parquet").read_bytes() == (tmp_path / "whole.parquet").read_bytes()
    meta = pq.ParquetFile(tmp_path / "stitched.parquet").metadata
    assert [meta.row_group(i).num_rows for i in range(meta.num_row_groups)] == [ROW_GROUP, ROW_GROUP, 321]

    double = pa.schema([("id", pa.string()), ("x", pa.int64())])
    twice = stitch_parquet(str(tmp_path / "converted.parquet"), double, parts,
                           lambda t: t.set_column(1, "x", pa.compute.multiply(t.column("x"), 2)))
    assert twice == n
    assert pq.read_table(tmp_path / "converted.parquet").column("x").to_pylist() == list(range(0, 2 * n, 2))
    stitch_parquet(str(tmp_path / "none.parquet"), table.schema, [])
    write_parquet(table.slice(0, 0), str(tmp_path / "empty.parquet"))
    assert (tmp_path / "none.parquet").read_bytes() == (tmp_path / "empty.parquet").read_bytes()


@pytest.fixture
def clustered_run(tmp_path):
    """The example corpus in two files, read, paired and clustered in three partitions (three
    member parts, each sorted by document on its own)."""
    texts = [json.loads(line)["text"] for line in open(EXAMPLE)]
    d = tmp_path / "in"
    d.mkdir()
    for name, part in (("a.jsonl", texts[:170]), ("b.jsonl", texts[170:])):
        with open(d / name, "w") as f:
            for i, t in enumerate(part):
                f.write(json.dumps({"id": f"{name}{i}", "text": t}) + "\n")
    config = Config(keep="longest").resolved()
    work = WorkDir(str(tmp_path / "work"), "write-test")
    run = Run(config=config, sources=nio.discover([str(d / "a.jsonl"), str(d / "b.jsonl")]), work=work,
              output=Folder.of(tmp_path / "out"), quiet=True)
    for stage, engine in ((ReadStage(), LocalEngine()), (PairsStage(), LocalEngine()),
                          (ClustersStage(), LocalEngine(partitions=3))):
        work.mark_done(stage.name, stage.run(run, engine))
    assert len(work.parts("clusters")) == 3
    return run


def _output(folder):
    return {os.path.relpath(os.path.join(root, f), folder): open(os.path.join(root, f), "rb").read()
            for root, _dirs, files in os.walk(folder) for f in files if f != "stats.json"}


def test_removed_and_clusters_in_order_from_many_ranges(clustered_run, tmp_path):
    run = clustered_run
    members = pa.concat_tables([run.work.folder.read_table(p) for p in run.work.parts("clusters")]).sort_by("doc")
    names = pa.array([s.name for s in run.sources], pa.string())

    stats = WriteStage().run(run, LocalEngine(partitions=12))
    ranges = stage_files(run.work.folder, "write", "removed-", ".arrow")
    assert len(ranges) >= 10 and len(stage_files(run.work.folder, "write", "clusters-", ".arrow")) >= 10
    out = tmp_path / "out"
    removed = pq.read_table(out / "removed.parquet")
    want = removed_records(members.filter(members.column("removed")), names)
    assert json.dumps(removed.to_pylist()) == json.dumps(want.to_pylist())  # NaN similarities compare as text
    assert removed.num_rows == stats["counts"]["removed"] > 20
    clusters = pq.read_table(out / "clusters.parquet")
    assert clusters.equals(cluster_records(members.sort_by([("cluster", "ascending"), ("doc", "ascending")])))
    assert pd.read_parquet(out / "clusters.parquet")["id"].tolist() == clusters.column("id").to_pylist()
    many = _output(out)

    WriteStage().run(run, LocalEngine())  # one range: the sort of every member at once
    assert len(stage_files(run.work.folder, "write", "removed-", ".arrow")) == 1
    assert _output(out) == many  # kept/ too: each writer found its removed rows in the sorted parts


def test_members_written_beside_kept_the_same_bytes_and_errors_raised(clustered_run, tmp_path, monkeypatch):
    """clusters.parquet and removed.parquet are written (on Ray: awaited) by a thread while kept/
    is written (the files the same as one step after another: the test before, and the Ray
    engine's tests against the local engine); an error of that thread is the stage's error,
    raised once kept/ is done (nothing left writing)."""
    import neardup.stages.write as write

    run = clustered_run
    threads = []
    real = write.stitch_output

    def stitch(*args, **kwargs):
        import threading
        threads.append(threading.current_thread().name)
        return real(*args, **kwargs)

    monkeypatch.setattr(write, "stitch_output", stitch)
    WriteStage().run(run, LocalEngine())
    assert threads == ["neardup-members"] * 2

    def broken(*args, **kwargs):
        raise OSError("disk full")

    monkeypatch.setattr(write, "stitch_output", broken)
    with pytest.raises(OSError, match="disk full"):
        WriteStage().run(run, LocalEngine())


def test_one_range_sorted_beside_kept(clustered_run, tmp_path, monkeypatch):
    """Every removed row in one range: the kept/ writers read their removed rows from the
    members parts (those not removed left out), and the removed range is sorted by the thread
    that writes clusters.parquet, beside kept/: the same files as many ranges sorted first."""
    import threading

    import neardup.stages.write as write

    run = clustered_run
    WriteStage().run(run, LocalEngine(partitions=4))
    many = _output(tmp_path / "out")
    sorted_by = []
    real = write.write_ranges

    def write_ranges(table, *, work, kind):
        sorted_by.append((kind, threading.current_thread().name))
        return real(table, work=work, kind=kind)

    monkeypatch.setattr(write, "write_ranges", write_ranges)
    WriteStage().run(run, LocalEngine())
    assert sorted_by == [("removed", "neardup-members"), ("clusters", "neardup-members")]
    assert _output(tmp_path / "out") == many


def test_write_members_names_the_parts_of_each_blocks_removed_rows(clustered_run):
    """What the kept/ writers are handed (one path for them): the members parts when the removed
    range is sorted beside kept/, else the sorted removed parts of the blocks' documents."""
    from neardup.stages.write import write_members

    run = clustered_run
    blocks = set(range(len(run.corpus.block_start) - 1))
    later = []
    assert write_members(run, LocalEngine(), later)(blocks) == run.work.parts("clusters") and len(later) == 1
    parts_of = write_members(run, LocalEngine(partitions=12))
    assert parts_of(blocks) == stage_files(run.work.folder, "write", "removed-", ".arrow")
    assert len(parts_of(blocks)) >= 10
