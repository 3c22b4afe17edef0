"""The pipeline's stages, written once for every engine.

    read      blocks of input files -> document shards; duplicate ids   :mod:`.read`
    pairs     partitions of buckets -> checked pairs -> verified pairs   :mod:`.pairs`
    clusters  partitions of whole clusters -> members                   :mod:`.clusters`
    write     groups of input files -> kept files; records, stats       :mod:`.write`

A stage is an object with ``name`` and ``run(run, engine) -> record``: it cuts its work into
partitions, hands each partition's function (pure: it reads its inputs from the work directory,
writes its part files and returns what it found) to the engine's ``map``, regroups rows between
steps with the engine's ``shuffle``, and finishes in the driver with the record that state.json
keeps (:mod:`.records`). When the engine wants one partition, a stage does its work in one piece
(every bucket, every cluster at once) with the same kernels. An engine (:mod:`neardup.engines`)
decides only where the calls run and how rows move; it knows nothing of the stages.

    workdir   the work directory both engines share: files, schemas, the read plan, resume
    records   what each stage records in state.json, and the counts partitions write beside
              their data
    identity  a run's identity and fingerprint (what --resume compares)
    corpus    the read stage's result as a whole, any documents' data read back, their ids
    context   the run as the stages see it (Run in the driver, Task in every call)
    against   --against and --update-index: the persistent index met by the read stage
    preload   the later stages' kernels loaded from numba's cache while the read stage runs
"""

from __future__ import annotations

import time
from typing import Protocol

from ..progress import check_interrupt
from .clusters import ClustersStage
from .context import Run, Task
from .pairs import PairsStage
from .preload import later_kernels, load_ahead, read_kernels
from .read import ReadStage
from .write import WriteStage



class Stage(Protocol):
    """A stage of the pipeline: its name, and its whole work over a run on an engine (see the
    module docstring); returns the record that state.json keeps (the write stage: the stats)."""

    name: str

    def run(self, run: Run, engine) -> object: ...


PIPELINE = (ReadStage(), PairsStage(), ClustersStage(), WriteStage())


def run_stages(run: Run, engine) -> dict:
    """Runs the stages not yet done (every stage after the first one run is run again; the
    write stage always); returns the stats (what stats.json will hold, with the seconds of each
    stage): writing it is the run's last step (:mod:`neardup.run`)."""
    redo = False
    loading = None
    try:
        for stage in PIPELINE:
            check_interrupt()
            if not redo and stage.name != "write" and run.work.is_done(stage.name):
                run.seconds[stage.name] = 0.0
                continue
            redo = True
            if stage.name == "read" and run.config.engine == "local":
                # the read stage's kernels, then the later stages', while the read stage runs
                loading = load_ahead(later_kernels(run), first=read_kernels(run))
            t0 = time.perf_counter()
            record = stage.run(run, engine)
            run.seconds[stage.name] = round(time.perf_counter() - t0, 3)
            if stage.name != "write":
                run.work.mark_done(stage.name, record)
    finally:
        run.close()  # the blocks' files opened ahead for a clusters stage that did not run (an error, an interrupt)
        if loading is not None:
            loading.join()
    run.stats["seconds"] = dict(run.seconds)
    run.work.mark_done("write", {})
    return run.stats


__all__ = ["Run", "Stage", "Task", "run_stages", "PIPELINE"]
