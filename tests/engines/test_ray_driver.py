"""Under Ray, the driver of a run never holds the member rows (one per document of a cluster):
the write stage's calls sort and write removed.parquet and clusters.parquet and the kept files,
the driver sees counts and names. Counted with what the driver process reads (``rchar`` of
/proc/self/io: every byte its threads read() or pread()), against the size of the member parts
the calls read: before the write stage moved into the calls, the driver read every one."""

from __future__ import annotations

import json
import sys

import numpy as np
import pytest

pytest.importorskip("ray")

from neardup import io as nio  # noqa: E402
from neardup.config import Config  # noqa: E402
from neardup.engines.ray import RayEngine  # noqa: E402
from neardup.io.storage.folder import Folder  # noqa: E402
from neardup.stages import Run  # noqa: E402
from neardup.stages.clusters import ClustersStage  # noqa: E402
from neardup.stages.pairs import PairsStage  # noqa: E402
from neardup.stages.read import ReadStage  # noqa: E402
from neardup.stages.workdir import WorkDir  # noqa: E402
from neardup.stages.write import WriteStage  # noqa: E402

pytestmark = [pytest.mark.slow, pytest.mark.ray,
              pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc/self/io"),
              pytest.mark.filterwarnings("ignore::DeprecationWarning:ray.data.context")]


def _rchar() -> int:
    with open("/proc/self/io") as f:
        return int(next(line for line in f if line.startswith("rchar:")).split()[1])


def _corpus(folder, pairs: int, id_chars: int):
    """``pairs`` exact duplicate pairs (each next to its twin) over four JSONL files, every
    document with an id of ``id_chars`` random hex characters: member rows (three ids each)
    weigh far more than anything else the write stage reads."""
    rng = np.random.default_rng(11)
    vocab = [f"w{i}" for i in range(5000)]
    folder.mkdir()
    files = []
    for f in range(4):
        path = folder / f"part{f}.jsonl"
        with open(path, "w") as out:
            for _ in range(pairs // 4):
                text = " ".join(rng.choice(vocab, 60).tolist())
                for _twin in range(2):
                    out.write(json.dumps({"id": rng.bytes(id_chars // 2).hex(), "text": text}) + "\n")
        files.append(str(path))
    return files


def test_the_write_stage_driver_reads_no_member_part(ray_local, tmp_path):
    files = _corpus(tmp_path / "in", pairs=1200, id_chars=4000)
    config = Config(id_column="id", engine="ray").resolved()
    work = WorkDir(str(tmp_path / "work"), "driver-test")
    run = Run(config=config, sources=nio.discover(files), work=work, output=Folder.of(tmp_path / "out"), quiet=True)
    with RayEngine(workers=2, quiet=True) as engine:
        for stage in (ReadStage(), PairsStage(), ClustersStage()):
            work.mark_done(stage.name, stage.run(run, engine))
        members = sum(work.folder.size(p) for p in work.parts("clusters"))
        before = _rchar()
        stats = WriteStage().run(run, engine)
        read = _rchar() - before
    assert stats["counts"]["removed"] == 1200 and members > 6_000_000
    # the driver reads its records (state.json, the plan, block summaries), never the members
    assert read < members / 10, f"the driver read {read:,} bytes; the member parts hold {members:,}"




def test_work_the_cluster_lost_is_one_line_a_bug_is_not(ray_local):
    """Work the cluster lost (a result whose owner, a Ray process, was killed: Ray raises
    OwnerDiedError where the engine waits for it) stops the run with one line that says
    --resume; an exception of neardup's own code in a task stays itself (a bug, its traceback)."""
    import os
    import signal
    import time

    import ray
    from neardup.errors import StorageError

    @ray.remote
    class Owner:  # defined here: pickled by value, workers need not import this file
        def make(self):
            return [ray.put(b"x" * 1_000_000)], os.getpid()

    def a_bug(table, **_):
        raise ZeroDivisionError("a bug in a task")

    with RayEngine(workers=2, quiet=True) as engine:
        refs, pid = ray.get(Owner.remote().make.remote())
        os.kill(pid, signal.SIGKILL)
        # Ray learns of the owner's death a little later (the object may still be read from
        # this node's store until the raylet frees it): wait until Ray itself says so
        deadline = time.monotonic() + 60
        while True:
            try:
                ray.get(refs[0], timeout=60)
            except ray.exceptions.OwnerDiedError:
                break
            assert time.monotonic() < deadline, "Ray never noticed that the owner died"
            time.sleep(0.2)
        with pytest.raises(StorageError, match=r"lost work it could not recompute \(OwnerDiedError: .*--resume"):
            list(engine._watched(lambda: [ray.get(refs[0], timeout=60)]))
        with pytest.raises(Exception) as bug:
            engine.collect(engine.map(a_bug, [1]))
    assert not isinstance(bug.value, StorageError) and "a bug in a task" in str(bug.value)
