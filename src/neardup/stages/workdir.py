"""The work directory: the contract between the stages, and the only thing the drivers know.

Its files are read and written through its :class:`~neardup.io.storage.Folder` (local or in a
store: the stages never ask which), by names relative to it (``read/block-000000.arrow``).

Every stage reads the files of the stages before it and writes its own, in one layout whichever
engine runs it, so that a run interrupted under one engine is finished by the other with
``--resume``. Inside the read stage every block is a partition of its own: a block whose summary
file exists is done and is not read again.

    WORK/state.json                 fingerprint of config + inputs, the stages done and their counts
                                    (rewritten as stages finish: it holds the options, not the inputs)
    WORK/inputs.json                each input's [name, path, size, mtime] (run_identity's), written
                                    once with the first state.json
    WORK/read/plan.json             the blocks: runs of consecutive input files, or one range of a
                                    large plain JSONL file (:mod:`neardup.io.splits`)
    WORK/read/ranges.json           {block: [nominal start, nominal end]} of the blocks that are ranges
    WORK/read/block-BBBBBB.arrow    Arrow IPC file, DOCS_SCHEMA: one row per document of the block
    WORK/read/block-BBBBBB.sig      raw uint32, num_perm per document (verify = estimate | none)
    WORK/read/block-BBBBBB.fp       the uint32 shingle fingerprints (the high halves of the
                                    64-bit shingle hashes), ``count`` per document, each
                                    document's as one Elias-Fano code (:mod:`neardup.kernels.eliasfano`:
                                    lossless, ~33 - log2(count) bits a fingerprint; a code's
                                    length follows from ``count``) (verify = exact)
    WORK/read/block-BBBBBB.lines    raw int64 (start, end) per document, its line as byte offsets of
                                    its file less a UTF-8 byte order mark at its start (end: the
                                    newline's, or the file's end), -1 where not
                                    known; only for a block with documents of uncompressed local
                                    JSONL files: the write stage copies the kept lines from them;
                                    none with --mark, --output-format other than same or an
                                    output in a store
    WORK/read/block-BBBBBB.lines-stat  raw int64 (source, device, inode, change time in ns) of
                                    those files before the block read them, beside .lines: the
                                    write stage copies from a file only while they are unchanged;
                                    none of a file changed within 2 s before (racily clean)
    WORK/read/block-BBBBBB.json     the block's summary (written last: the block is done)
    WORK/pairs/part-PPPPP.arrow     PAIRS_SCHEMA: verified pairs (left < right) of one partition
    WORK/pairs/search-PPPPP.json    the counts of one partition's bucket search (``PairsInfo``)
    WORK/clusters/part-PPPPP.arrow    MEMBERS_SCHEMA: every document of a cluster of two or more
    WORK/clusters/part-against-BBBBBB.arrow  MEMBERS_SCHEMA: block B's documents an index
                                    holds (``--against``), removed
    WORK/clusters/star-RRR-PPPPP.json the count of one partition's large-star step (``StarStep``)
    WORK/write/removed-RRRRR.arrow    MEMBERS_SCHEMA: the removed members of documents
                                    [R*W, (R+1)*W) (W: the range width), sorted by document
    WORK/write/clusters-RRRRR.arrow   CLUSTERS_SCHEMA rows of the members whose cluster (its
                                    head's document) is in [R*W, (R+1)*W), by cluster, then document:
                                    removed.parquet and clusters.parquet are these, stitched in order

A document is known by a dense index: blocks in order, rows in order inside a block (so: input
file order, then row order). Block b's first document is the sum of the documents of the blocks
before it. docs/stages.md describes each stage with its schema.
"""

from __future__ import annotations

import dataclasses
import operator
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np
import pyarrow as pa

from ..errors import ConfigError
from ..kernels.arrays import arrow
from ..io.storage import fs
from ..io.splits import nominal_ranges, split_bytes, splittable
from ..io.storage.folder import Folder
from .background import Background
from .identity import differences, encoded, fingerprint
from .records import STAGE_INFO

STAGES = ("read", "pairs", "clusters", "write")
LAYOUT_VERSION = 9              # 9: read/block-B.lines (the documents' lines, for the write stage); 8: a range of a split file numbers its rows from 0 (summary "lines"); 7: pairs, clusters and write parts Arrow IPC; 6: large JSONL files split into ranges; 5: fingerprints Elias-Fano coded, \w+ words, hash_version; 4: typed stage records; 3: .fp
# not bumped for the block summaries' optional "runs" (corpus.add_row_runs): a layout-8 dir read
# before them has none, and the clusters stage then reads its blocks' sources and rows (tested)
BLOCK_BYTES = 64 << 20          # input bytes per read block (a block holds whole files)
MAX_DOCUMENTS = 1 << 32         # document indices are packed two to a uint64 in pair codes


def docs_schema(config) -> pa.Schema:
    """What the read stage keeps of every document (besides its signature or shingles)."""
    fields = [("source", pa.int32()), ("row", pa.int64()), ("length", pa.int64()), ("count", pa.int64()),
              ("keys", pa.binary(8 * config.bands))]
    if config.score_column is not None:
        fields.append(("score", pa.float64()))
    if config.id_column is not None:
        fields.append(("id", pa.string()))
    return pa.schema(fields)


PAIRS_SCHEMA = pa.schema([("left", pa.int64()), ("right", pa.int64()), ("similarity", pa.float64())])
MEMBERS_SCHEMA = pa.schema([("doc", pa.int64()), ("source", pa.int32()), ("row", pa.int64()),
                            ("cluster", pa.int64()), ("representative", pa.int64()), ("similarity", pa.float64()),
                            ("removed", pa.bool_()), ("id", pa.string()), ("cluster_id", pa.string()),
                            ("representative_id", pa.string()), ("representative_source", pa.string())])


def members_table(docs, source, row, cluster, representative, similarity, removed, ids: pa.Array,
                  cluster_id: pa.Array, representative_id: pa.Array, representative_source: pa.Array) -> pa.Table:
    """Member rows (MEMBERS_SCHEMA): for each document of a cluster of two or more (or matched in
    an index), its cluster and representative as document indices (-1: none here) and as ids."""
    return pa.table({"doc": arrow(docs), "source": arrow(source), "row": arrow(row), "cluster": arrow(cluster),
                     "representative": arrow(representative), "similarity": arrow(similarity),
                     "removed": arrow(removed), "id": ids, "cluster_id": cluster_id,
                     "representative_id": representative_id, "representative_source": representative_source},
                    schema=MEMBERS_SCHEMA)


def plan_blocks(sources: Sequence, block_bytes: Optional[int] = None,
                file_sizes: Optional[Sequence[Optional[int]]] = None) -> List[List[int]]:
    """The blocks of :func:`plan_reads` (whole files only when none is larger than the split size)."""
    return plan_reads(sources, block_bytes, file_sizes)[0]


def plan_reads(sources: Sequence, block_bytes: Optional[int] = None,
               file_sizes: Optional[Sequence[Optional[int]]] = None,
               split: Optional[int] = None) -> Tuple[List[List[int]], Dict[int, List[int]]]:
    """``(blocks, ranges)``: runs of consecutive sources of about ``block_bytes`` (default
    BLOCK_BYTES) of input each, and a plain JSONL file larger than ``split`` (default
    :func:`neardup.io.splits.split_bytes`) cut into ranges of that size, a block each (``[si]``;
    ``ranges[block]``: its nominal [start, end)). The plan depends on the inputs only, so that
    every engine cuts the same blocks. ``file_sizes``: the size of each source that is a file
    (None for a table), as :func:`run_identity` found them (a store is not asked again); asked
    here without it."""
    block_bytes = BLOCK_BYTES if block_bytes is None else block_bytes
    split = split_bytes() if split is None else split
    if file_sizes is None:
        infos = fs.infos([s.path for s in sources if s.format != "table"])
        file_sizes = [None if s.format == "table" else infos[s.path].size for s in sources]
    if sources and "table" not in map(_format_of, sources) and max(file_sizes) <= split:
        return _whole_files(file_sizes, block_bytes), {}
    blocks: List[List[int]] = []
    ranges: Dict[int, List[int]] = {}
    acc = 0
    for si, s in enumerate(sources):
        size = s.table.nbytes if s.format == "table" else file_sizes[si]
        if s.format != "table" and size > split and splittable(s):
            for start, end in nominal_ranges(size, split):
                ranges[len(blocks)] = [start, end]
                blocks.append([si])
            blocks.append([])  # the next source starts a block
            acc = 0
            continue
        if not blocks or (blocks[-1] and acc + size > block_bytes):
            blocks.append([])
            acc = 0
        blocks[-1].append(si)
        acc += size
    if blocks and not blocks[-1]:
        blocks.pop()
    return blocks, ranges


_format_of = operator.attrgetter("format")


def _whole_files(sizes: Sequence[int], block_bytes: int) -> List[List[int]]:
    """:func:`plan_reads`'s blocks where every source is a file read whole (none a table, none
    larger than the split size): a block takes the files after its first while its bytes stay
    within ``block_bytes``, found by a binary search of the sizes' running sum a block (a
    folder of 100,000 files: ~3 ms, not ~30 in a loop a file)."""
    ends = np.concatenate([[0], np.cumsum(np.asarray(sizes, np.int64))])  # bytes before file i: ends[i]
    blocks: List[List[int]] = []
    first = 0
    while first < len(sizes):
        stop = max(first + 1, int(np.searchsorted(ends, ends[first] + block_bytes, side="right")) - 1)
        blocks.append(list(range(first, stop)))
        first = stop
    return blocks


INPUTS = "inputs.json"
PLAN = "read/plan.json"
RANGES = "read/ranges.json"
def stage_files(work: Folder, stage: str, prefix: str, ext: str) -> List[str]:
    """The names (relative to the work dir) of a stage's files ``PREFIX*EXT``, sorted."""
    return [f"{stage}/{f}" for f in work.file_names(stage) if f.startswith(prefix) and f.endswith(ext)]


def write_record(work: Folder, name: str, record) -> None:
    """A partition's counts (a dataclass of :mod:`.records`), written beside its data as the
    JSON file ``name``: typed, and never rows inside the data (:meth:`WorkDir.records`)."""
    work.write_json(name, dataclasses.asdict(record))


def part_name(stage: str, part: int) -> str:
    """A stage's file of one partition (pairs, clusters), relative to the work dir."""
    return f"{stage}/part-{part:05d}.arrow"


def range_name(kind: str, r: int) -> str:
    """The write stage's sorted part of range ``r`` (``kind``: removed, clusters), relative to
    the work dir: in range order by name."""
    return f"write/{kind}-{r:05d}.arrow"


LINE_BOUNDS = "lines"  # the extension of a read block's document lines (see the module)
LINE_STATS = "lines-stat"  # the extension of the stat of a read block's files whose lines it knows


def block_name(block: int, ext: str) -> str:
    """A read block's file, relative to the work dir."""
    return f"read/block-{block:06d}.{ext}"


def _record(info) -> dict:
    """A stage's record (a dataclass of :mod:`.records`: numbers and flat lists of numbers or
    tuples) as state.json keeps it: ``dataclasses.asdict`` without its copy of each item."""
    out = {}
    for f in dataclasses.fields(info):
        v = getattr(info, f.name)
        if isinstance(v, list) and all(isinstance(x, (int, float, str, tuple)) for x in v):
            v = list(v)  # numbers and tuples of them need no copy
        elif not isinstance(v, (int, float, str, bool, type(None))):
            v = dataclasses.asdict(info)[f.name]
        out[f.name] = v
    return out


class WorkDir:
    """The work directory of one run (see the module docstring), a folder neardup owns (marker
    ``.neardup``, kind ``work-dir``, format LAYOUT_VERSION: see :mod:`neardup.io.storage.folder`).

    ``identity`` is :func:`run_identity` (or a plain fingerprint string). A folder holding work
    is reused only with ``resume`` and the same identity; otherwise it is refused in one line
    that says why (the work of an interrupted run of the same command can be resumed; another
    run's work differs in ...), unless ``overwrite`` says to discard it."""

    def __init__(self, folder, identity, resume: bool = False, overwrite: bool = False, disposable: bool = False,
                 run_fingerprint: Optional[str] = None):
        self.folder = Folder.of(folder)
        # removed after the run (``disposable``: no --keep-work, no --update-index) and local:
        # its fingerprints go from the write stage on (:meth:`remove_fingerprints_later`)
        self.disposable = disposable and self.folder.os_path is not None
        # ``run_fingerprint``: fingerprint(identity) where the caller has it (the hash of 100,000
        # inputs' JSON is 0.08 CPU-s)
        self.fingerprint = fingerprint(identity) if run_fingerprint is None else run_fingerprint
        identity = identity if isinstance(identity, dict) else {"fingerprint": identity}
        # the inputs (100,000 files: ~14 MB of JSON) go to inputs.json once, not into every state.json
        self.inputs = identity.get("inputs")
        kept = {k: v for k, v in identity.items() if k != "inputs"}
        marker = self.folder.claim("work-dir", "--work-dir", LAYOUT_VERSION)
        state = self.folder.read_json("state.json")
        state = state if isinstance(state, dict) and isinstance(state.get("done"), dict) else None
        # work worth keeping: a recorded state with a stage done or a block read. Without them
        # (no state.json: killed while writing the first one; or a run that stopped before its
        # first block was whole: a check that failed, a bad first record) nothing can be resumed,
        # and the folder is ours to reuse without --overwrite
        has_work = state is not None and bool(state["done"] or self._blocks_read())
        same = (state is not None and marker.get("format") == LAYOUT_VERSION and state.get("layout") == LAYOUT_VERSION
                and state.get("fingerprint") == self.fingerprint)
        if has_work and not same and not overwrite:
            what = (f"the work of neardup's layout {marker.get('format')} (this version writes {LAYOUT_VERSION})"
                    if marker.get("format") != LAYOUT_VERSION else
                    "another run's work (differs: " + ", ".join(differences(self._stored_identity(state),
                                                                            identity)) + ")")
            if resume:
                raise ConfigError(f"cannot resume: the work dir {self.folder} holds {what}; run the original "
                                  f"command to resume it, or pass --overwrite (without --resume) to start over")
            raise ConfigError(f"the work dir {self.folder} holds {what}; pass --overwrite to discard it, or choose "
                              f"another --work-dir")
        if has_work and same and not resume and not overwrite:
            done = ", ".join(s for s in STAGES if s in state["done"]) or "no stage"
            raise ConfigError(f"the work dir {self.folder} holds an interrupted run of these inputs and options "
                              f"(stages done: {done}); pass --resume to continue it, or --overwrite to start over")
        if same and resume:
            self.state = state
        else:
            self.folder.empty()
            if marker.get("format") != LAYOUT_VERSION:
                self.folder.set_marker({**marker, "format": LAYOUT_VERSION})
            self.state = {"fingerprint": self.fingerprint, "layout": LAYOUT_VERSION, "done": {},
                          "identity": kept}
            self.folder.makedirs()
            if self.inputs is not None:
                self.folder.write_bytes(INPUTS, (encoded(self.inputs) + "\n").encode())  # as write_json(indent=None)
        self.folder.makedirs()
        self._save()

    def _stored_identity(self, state: Optional[dict]) -> Optional[dict]:
        """The identity a state.json records, with its inputs (from inputs.json; inline in the
        state.json of an older neardup)."""
        stored = (state or {}).get("identity")
        if isinstance(stored, dict) and "inputs" not in stored:
            inputs = self.folder.read_json(INPUTS)
            if inputs is not None:
                stored = {**stored, "inputs": inputs}
        return stored

    def _blocks_read(self) -> bool:
        """Whether the read stage finished a block (its summary is written last)."""
        return any(n.startswith("block-") and n.endswith(".json") for n in self.folder.file_names("read"))

    def _save(self) -> None:
        # on one line: the C encoder (the read record holds a count per input file: 100,000 of
        # them took Python's indenting encoder seconds, at each of the five saves)
        self.folder.write_json("state.json", self.state, indent=None)

    def is_done(self, stage: str) -> bool:
        return stage in self.state["done"]

    def info(self, stage: str):
        """The record of a stage done (:data:`STAGE_INFO`)."""
        record = self.state["done"][stage]
        return STAGE_INFO[stage](**record) if stage in STAGE_INFO else record

    def mark_done(self, stage: str, info=None) -> None:
        self.state["done"][stage] = _record(info) if dataclasses.is_dataclass(info) else (info or {})
        for later in STAGES[STAGES.index(stage) + 1:]:  # a stage done anew invalidates the ones after it
            self.state["done"].pop(later, None)
        self._save()

    def stage_dir(self, stage: str, fresh: bool = False) -> None:
        """Makes the stage's folder (``fresh``: emptied of an earlier attempt's files first)."""
        if fresh:
            self.folder.remove(stage)
        self.folder.makedirs(stage)

    # -- the read stage's blocks

    def plan(self, sources: Sequence) -> List[List[int]]:
        """The read plan: made and kept on the first call, read back on a resumed run."""
        self.stage_dir("read")
        try:
            return self.folder.load_json(PLAN)
        except FileNotFoundError:
            pass
        inputs = self.inputs  # run_identity's: [name, path, size, mtime] per file
        sizes = getattr(inputs, "sizes", None)  # of a folder's files (run_identity's _plain_inputs)
        if sizes is None or len(sizes) != len(sources):
            sizes = None if inputs is None else [None if s.format == "table" else f[2] for s, f in zip(sources, inputs)]
        blocks, ranges = plan_reads(sources, file_sizes=sizes)
        self.folder.write_json(RANGES, {str(b): r for b, r in ranges.items()})  # before the plan that needs it
        self.folder.write_json(PLAN, blocks, indent=None)  # on one line: the C encoder (100,000 files: 0.02 s)
        return blocks

    def ranges(self) -> Dict[int, List[int]]:
        """{block: [nominal start, nominal end]} of the plan's blocks that are ranges of a file."""
        try:
            return {int(b): r for b, r in self.folder.load_json(RANGES).items()}
        except FileNotFoundError:
            return {}

    def block_summary(self, block: int) -> Optional[dict]:
        try:
            return self.folder.load_json(block_name(block, "json"))
        except (OSError, ValueError):
            return None

    def parts(self, stage: str) -> List[str]:
        """The names (relative to the work dir) of a stage's part files, sorted."""
        return stage_files(self.folder, stage, "part-", ".arrow")

    def records(self, stage: str, prefix: str, record) -> list:
        """The counts the partitions of a stage wrote beside their data (:func:`write_record`)."""
        return [record(**self.folder.load_json(name)) for name in stage_files(self.folder, stage, prefix, ".json")]

    def remove(self, whole: bool = True) -> None:
        """After a successful run: the whole folder, or (``whole=False``, a folder the user named,
        which keeps its lock file) everything in it but its marker and lock."""
        try:
            self.folder.remove_all() if whole else self.folder.empty()
        except OSError:
            pass

    _removal: Optional[Background] = None

    def remove_fingerprints_later(self) -> None:
        """The first part of :meth:`remove`, begun in a thread when the write stage starts (the
        write stage, the report and the publish run meanwhile; :meth:`join_removal` waits), for
        a :attr:`disposable` work dir: the read stage's per-document files (``read/block-*.fp``
        / ``.sig``: ~85% of the work dir's bytes), which only the pair stage, the clusters
        stage's ``--against`` matching and ``--update-index`` read. What a resume needs stays
        (read, pairs and clusters are done, and a ``--resume`` redoes only the write stage; a
        resume with ``--update-index`` is another run's, refused), so an interruption or a kill
        leaves a resumable work dir, as before. The time is the file system's, not the CPU's:
        ~0.6 s for the ~1.2 GB of a 1M-document run."""
        if self.disposable and self._removal is None:
            self._removal = Background(self._remove_fingerprints, "neardup-work-removal")

    def join_removal(self) -> None:
        """Waits for :meth:`remove_fingerprints_later`'s thread, if one was started (it swallows
        its errors, as :meth:`remove` does: called on a run's error too, it raises nothing)."""
        if self._removal is not None:
            self._removal.wait()

    def _remove_fingerprints(self) -> None:
        try:
            for name in self.folder.file_names("read"):
                if name.startswith("block-") and name.endswith((".fp", ".sig")):
                    self.folder.remove(f"read/{name}")
        except OSError:
            pass

