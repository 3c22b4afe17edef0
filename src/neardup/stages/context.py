"""A run as the stages see it: :class:`Run` in the driver, :class:`Task` in every call an engine
makes (small and picklable: what a partition's function needs to find its inputs)."""

from __future__ import annotations

import copy
import dataclasses
from dataclasses import dataclass, field
from typing import Callable, Dict, List, Optional

import numpy as np

from .. import io as nio
from ..io.storage.folder import Folder
from ..kernels.arrays import unique
from ..report.output_folder import KeptTally
from .against import matched_docs
from .corpus import Corpus, DocStore
from .workdir import WorkDir


@dataclass
class Task:
    """What every call of a stage's partition function gets: the config, the work dir's Folder
    and a :class:`DocStore` on it, and the sources (an in-memory table as an engine's shared
    handle: ``source.table.get()``, see :meth:`sources_with_tables`)."""
    config: object
    work: Folder
    sources: List[nio.Source]
    store: Optional[DocStore] = None

    def sources_with_tables(self) -> List[nio.Source]:
        return [dataclasses.replace(s, table=s.table.get()) if s.format == "table" else s for s in self.sources]


@dataclass
class Run:
    """One run in the driver: its config (resolved: bands and rows set), sources, work dir and
    output folder (the staging folder while it runs, where the write stage puts the result);
    the seconds of each stage and the stats. The read stage's result as a whole
    (:attr:`corpus`, :attr:`store`) is made once."""
    config: object
    sources: List[nio.Source]
    work: WorkDir
    output: Folder
    quiet: bool = False
    seconds: Dict[str, float] = field(default_factory=dict)
    stats: Optional[dict] = None
    kept_tally: Optional[KeptTally] = None  # kept/'s files and bytes, as the write stage wrote them
    # called by the write stage's thread once removed.parquet and clusters.parquet are written,
    # while kept/ is (the report's reading ahead: neardup.run); it must raise nothing
    after_members: Optional[Callable[[], None]] = None
    # what that reading found (neardup.report.html.ReadAhead), for the run's page; the run's own
    report_ahead: Optional[object] = field(default=None, repr=False)
    _corpus: Optional[Corpus] = field(default=None, repr=False)
    _store: Optional[DocStore] = field(default=None, repr=False)

    @property
    def corpus(self) -> Corpus:
        if self._corpus is None:
            self._corpus = Corpus(self.work, self.config, self.work.plan(self.sources))
        return self._corpus

    @property
    def store(self) -> DocStore:
        if self._store is None:
            self._store = DocStore(self.work.folder, self.corpus.block_start, self.config.num_perm,
                                   self.corpus.row_base, self.corpus.row_runs)
        return self._store

    def close(self) -> None:
        """Lets go of what the run holds open from one stage to the next: the blocks' files its
        store opened ahead (:meth:`DocStore.close`)."""
        if self._store is not None:
            self._store.close()

    def forget_corpus(self) -> None:
        """Before the read stage runs (again): what was read before is no longer the corpus."""
        self._corpus = self._store = None

    def info(self, stage: str):
        return self.work.info(stage)

    def task(self, engine, with_store: bool = True) -> Task:
        """The :class:`Task` of this run for ``engine`` (which shares the in-memory tables); with
        the store once every block is read."""
        sources = [dataclasses.replace(s, table=engine.share(s.table)) if s.format == "table" else s
                   for s in self.sources]
        return Task(self.config, self.work.folder, sources, self.store if with_store else None)

    def for_call(self, engine) -> "Run":
        """This run as one call of ``engine`` gets it (small and picklable: the sources' tables as
        the engine's shared handles, nothing read kept, the inputs' identity left out); the call
        makes it whole again with :meth:`in_call`."""
        work = copy.copy(self.work)
        work.inputs = None  # only a plan not yet made needs them
        return dataclasses.replace(self, sources=self.task(engine, with_store=False).sources, work=work,
                                   seconds={}, stats=None, report_ahead=None, _corpus=None, _store=None)

    def in_call(self) -> "Run":
        """A run of :meth:`for_call` where the call runs: the in-memory tables fetched."""
        return dataclasses.replace(self, sources=Task(self.config, self.work.folder, self.sources).sources_with_tables())

    def user_ids_wanted(self) -> bool:
        """Whether documents are known by the user's ids (else by position: FILE:LINE, FILE:ROW)."""
        return self.config.id_column is not None

    def excluded_from_pairs(self) -> np.ndarray:
        """Documents that take no part in the run's own pairs: those rejected after reading
        (duplicate ids) and those an index already holds (``--against``), ascending."""
        out = [self.info("read").rejected_docs()]
        if self.config.against:
            out.append(matched_docs(self.work.folder, self.corpus.block_start))
        return unique(np.concatenate(out))
