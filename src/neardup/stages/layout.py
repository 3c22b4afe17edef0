"""The work directory: the contract between the stages, and the only thing the drivers know.

Every stage reads the files of the stages before it and writes its own, in one layout whichever
engine runs it, so that a run interrupted under one engine is finished by the other with
``--resume``. Inside the read stage every block is a partition of its own: a block whose summary
file exists is done and is not read again.

    WORK/state.json                 fingerprint of config + inputs, the stages done and their counts
    WORK/read/plan.json             the blocks: runs of consecutive input files (a file is never split)
    WORK/read/block-BBBBBB.arrow    Arrow IPC file, DOCS_SCHEMA: one row per document of the block
    WORK/read/block-BBBBBB.sig      raw uint32, num_perm per document (verify = estimate | none)
    WORK/read/block-BBBBBB.fp       the uint32 shingle fingerprints (the high halves of the
                                    64-bit shingle hashes), ``count`` per document, each
                                    document's as one Elias-Fano code (:mod:`neardup.kernels.eliasfano`:
                                    lossless, ~33 - log2(count) bits a fingerprint; a code's
                                    length follows from ``count``) (verify = exact)
    WORK/read/block-BBBBBB.json     the block's summary (written last: the block is done)
    WORK/pairs/part-PPPPP.parquet   PAIRS_SCHEMA: verified pairs (left < right) of one partition
    WORK/pairs/summary.json         the stage's counts
    WORK/clusters/part-PPPPP.parquet  MEMBERS_SCHEMA: every document of a cluster of two or more
    WORK/clusters/summary.json      the stage's counts and the largest clusters (for the report)

A document is known by a dense index: blocks in order, rows in order inside a block (so: input
file order, then row order). Block b's first document is the sum of the documents of the blocks
before it. docs/stages.md describes each stage with its schema.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np
import pyarrow as pa

from ..kernels.arrays import arrow, to_numpy, unique
from ..kernels import eliasfano
from .. import io as nio
from ..errors import ConfigError
from ..io.storage import fs, ranges
from ..io.storage.folder import Folder
from ..io.storage.tables import read_table

STAGES = ("read", "pairs", "clusters", "write")
LAYOUT_VERSION = 5              # 5: fingerprints Elias-Fano coded, \w+ words, hash_version; 4: typed stage records; 3: .fp
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


# --------------------------------------------------------------------------- what each stage records
# state.json keeps, for every stage done, its record (a dataclass as a JSON object): what the later
# stages and stats.json need to know of it without reading its files again.


@dataclass
class ReadInfo:
    documents: int = 0
    blocks: int = 0
    blocks_read: int = 0
    per_source: List[int] = field(default_factory=list)
    rejected_records: int = 0
    rejected_documents: List[Tuple[int, str]] = field(default_factory=list)  # [doc, reason], doc order
    empty_kept: int = 0
    skipped_files: List[Tuple[int, str]] = field(default_factory=list)  # [source, reason] (Batch.skipped)

    def rejected_docs(self) -> np.ndarray:
        """The documents rejected after reading (duplicate ids), ascending."""
        return np.array([d for d, _ in self.rejected_documents], np.int64)


@dataclass
class PairsInfo:
    candidate_pairs: int = 0
    verified_pairs: int = 0
    buckets: int = 0
    anchor_rounds: int = 0
    truncated_buckets: int = 0
    verifications: int = 0

    @classmethod
    def merge(cls, parts: Sequence["PairsInfo"]) -> "PairsInfo":
        return cls(**{f.name: (max if f.name == "anchor_rounds" else sum)([getattr(p, f.name) for p in parts] or [0])
                      for f in dataclasses.fields(cls)})


@dataclass
class ClustersInfo:
    members: int = 0
    removed: int = 0
    clusters: int = 0
    top: List[dict] = field(default_factory=list)   # the largest clusters, for the report
    removed_against_index: int = 0
    cc_rounds: int = 0


STAGE_INFO = {"read": ReadInfo, "pairs": PairsInfo, "clusters": ClustersInfo}


def run_identity(config, sources) -> dict:
    """A run's identity: the options that change its result (:meth:`Config.identity`: not those
    of the Execution group, so that a run may be resumed with other workers, engine or batch
    size), and each input's name, size and modification time. Kept in state.json, so that a
    refused ``--resume`` can say what differs."""
    relevant = config.identity()
    relevant["against"] = [fs.redact(a) for a in relevant.get("against") or ()]  # state.json stores no password
    files = []
    infos = fs.infos([s.path for s in sources if s.format != "table"])
    for s in sources:
        if s.format == "table":
            files.append([s.name, "table", int(s.table.num_rows)])
            continue
        st = infos.get(s.path) or fs.info(s.path)
        files.append([fs.redact(s.name), fs.redact(s.path), st.size, st.mtime_ns])
    return {"config": relevant, "inputs": files}


def fingerprint(identity) -> str:
    """The hash of a run's identity (:func:`run_identity`; a string is taken as a fingerprint)."""
    if isinstance(identity, str):
        return identity
    return hashlib.sha256(json.dumps(identity, sort_keys=True).encode()).hexdigest()


def differences(old: Optional[dict], new: dict) -> List[str]:
    """What differs between two run identities, in words: ``inputs`` and the option names."""
    if not isinstance(old, dict) or not isinstance(new, dict):
        return ["the run (an older neardup wrote it)"]
    new = json.loads(json.dumps(new))  # as stored: tuples are lists there
    out = []
    if old.get("inputs") != new.get("inputs"):
        out.append("inputs")
    a, b = old.get("config") or {}, new.get("config") or {}
    out.extend(sorted(k for k in set(a) | set(b) if a.get(k) != b.get(k)))
    return out or ["nothing recorded"]


def plan_blocks(sources: Sequence, block_bytes: Optional[int] = None,
                file_sizes: Optional[Sequence[Optional[int]]] = None) -> List[List[int]]:
    """Runs of consecutive sources of about ``block_bytes`` (default BLOCK_BYTES) of input each
    (a source is never split). The plan depends on the inputs only, so that every engine cuts the
    same blocks. ``file_sizes``: the size of each source that is a file (None for a table), as
    :func:`run_identity` found them (a store is not asked again); asked here without it."""
    block_bytes = BLOCK_BYTES if block_bytes is None else block_bytes
    if file_sizes is None:
        infos = fs.infos([s.path for s in sources if s.format != "table"])
        file_sizes = [None if s.format == "table" else infos[s.path].size for s in sources]
    blocks: List[List[int]] = []
    acc = 0
    for si, s in enumerate(sources):
        size = s.table.nbytes if s.format == "table" else file_sizes[si]
        if not blocks or (blocks[-1] and acc + size > block_bytes):
            blocks.append([])
            acc = 0
        blocks[-1].append(si)
        acc += size
    return blocks


def part_path(work_path: str, stage: str, part: int) -> str:
    """A stage's file of one partition (pairs, clusters)."""
    return fs.join(work_path, stage, f"part-{part:05d}.parquet")


def block_path(work_path: str, block: int, ext: str) -> str:
    return fs.join(work_path, "read", f"block-{block:06d}.{ext}")


def write_json(path: str, value) -> None:
    """A JSON file written atomically (a temporary name and a rename locally; one object put on a
    store, which has no rename)."""
    fs.write_bytes(path, json.dumps(value, sort_keys=True).encode())


def read_json(path: str):
    """A JSON file of the work dir; FileNotFoundError when it is not there, and any other
    problem reading it (a store's, a disk's) one line."""
    try:
        data = fs.read_bytes(path)
    except FileNotFoundError:
        raise
    except OSError as e:
        from ..errors import InputError
        raise InputError(f"{fs.redact(path)}: {e}") from None
    return json.loads(data)


class WorkDir:
    """The work directory of one run (see the module docstring), a folder neardup owns (marker
    ``.neardup``, kind ``work-dir``, format LAYOUT_VERSION: see :mod:`neardup.io.storage.folder`).

    ``identity`` is :func:`run_identity` (or a plain fingerprint string). A folder holding work
    is reused only with ``resume`` and the same identity; otherwise it is refused in one line
    that says why (the work of an interrupted run of the same command can be resumed; another
    run's work differs in ...), unless ``overwrite`` says to discard it."""

    def __init__(self, path: str, identity, resume: bool = False, overwrite: bool = False):
        self.folder = Folder.of(path)
        self.path = self.folder.path
        self.fingerprint = fingerprint(identity)
        identity = identity if isinstance(identity, dict) else {"fingerprint": identity}
        marker = self.folder.claim("work-dir", "--work-dir", LAYOUT_VERSION)
        state = self.folder.read_json("state.json")
        state = state if isinstance(state, dict) and isinstance(state.get("done"), dict) else None
        # work worth keeping: a recorded state and stage files beside it (without a state.json,
        # e.g. killed while writing the first one, nothing can be resumed: the folder is ours to reuse)
        has_work = state is not None and any(n != "state.json" and not n.endswith(".tmp")
                                             for n in self.folder.foreign_names())
        same = (state is not None and marker.get("format") == LAYOUT_VERSION and state.get("layout") == LAYOUT_VERSION
                and state.get("fingerprint") == self.fingerprint)
        if has_work and not same and not overwrite:
            what = (f"the work of neardup's layout {marker.get('format')} (this version writes {LAYOUT_VERSION})"
                    if marker.get("format") != LAYOUT_VERSION else
                    "another run's work (differs: " + ", ".join(differences((state or {}).get("identity"),
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
                          "identity": identity}
        self.folder.makedirs()
        self._save()

    def _save(self) -> None:
        write_json(fs.join(self.path, "state.json"), self.state)

    def is_done(self, stage: str) -> bool:
        return stage in self.state["done"]

    def info(self, stage: str):
        """The record of a stage done (:data:`STAGE_INFO`)."""
        record = self.state["done"][stage]
        return STAGE_INFO[stage](**record) if stage in STAGE_INFO else record

    def mark_done(self, stage: str, info=None) -> None:
        self.state["done"][stage] = dataclasses.asdict(info) if dataclasses.is_dataclass(info) else (info or {})
        for later in STAGES[STAGES.index(stage) + 1:]:  # a stage done anew invalidates the ones after it
            self.state["done"].pop(later, None)
        self._save()

    def stage_dir(self, stage: str, fresh: bool = False) -> str:
        d = fs.join(self.path, stage)
        if fresh:
            fs.remove_tree(d)
        fs.makedirs(d)
        return d

    def file(self, stage: str, name: str) -> str:
        return fs.join(self.path, stage, name)

    # -- the read stage's blocks

    def block_path(self, block: int, ext: str) -> str:
        return block_path(self.path, block, ext)

    def plan(self, sources: Sequence) -> List[List[int]]:
        """The read plan: made and kept on the first call, read back on a resumed run."""
        self.stage_dir("read")
        path = self.file("read", "plan.json")
        try:
            return read_json(path)
        except FileNotFoundError:
            pass
        inputs = self.state["identity"].get("inputs")  # run_identity's: [name, path, size, mtime] per file
        sizes = None if inputs is None else [None if s.format == "table" else f[2] for s, f in zip(sources, inputs)]
        blocks = plan_blocks(sources, file_sizes=sizes)
        write_json(path, blocks)
        return blocks

    def block_summary(self, block: int) -> Optional[dict]:
        try:
            return read_json(self.block_path(block, "json"))
        except (OSError, ValueError):
            return None

    def part_path(self, stage: str, part: int) -> str:
        return part_path(self.path, stage, part)

    def parts(self, stage: str) -> List[str]:
        d = fs.join(self.path, stage)
        if not fs.isdir(d):  # an object store has no empty folders
            return []
        names = [name for name, is_dir in fs.listdir(d) if not is_dir]
        return sorted(fs.join(d, f) for f in names if f.startswith("part-") and f.endswith(".parquet"))

    def remove(self, whole: bool = True) -> None:
        """After a successful run: the whole folder, or (``whole=False``, a folder the user named,
        which keeps its lock file) everything in it but its marker and lock."""
        try:
            self.folder.remove_all() if whole else self.folder.empty()
        except OSError:
            pass


class Corpus:
    """The read stage's result as a whole: per-block summaries, document offsets, and the small
    per-document columns (source, row, length, count, keys, score, id) on demand."""

    def __init__(self, work: WorkDir, config, blocks: Sequence[Sequence[int]]):
        self.work = work
        self.config = config
        self.blocks = blocks
        self.summaries: List[dict] = [work.block_summary(b) for b in range(len(blocks))]
        if any(s is None for s in self.summaries):
            raise RuntimeError("internal error: the read stage is recorded as done but a block is missing")
        counts = np.array([s["documents"] for s in self.summaries], dtype=np.int64)
        self.block_start = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
        self.n = int(self.block_start[-1])
        self._columns: Dict[str, np.ndarray] = {}

    def table(self, block: int, columns: Optional[List[str]] = None) -> pa.Table:
        return read_table(self.work.block_path(block, "arrow"), columns)

    def column(self, name: str) -> np.ndarray:
        """One numeric column over every document (kept in memory after the first call), made
        with one copy: each block's chunks are zero-copy views of its memory-mapped file."""
        if name not in self._columns:
            views = []
            for b in range(len(self.blocks)):
                for chunk in self.table(b, [name]).column(0).chunks:
                    if name == "keys":
                        views.append(fixed_binary_numpy(chunk, np.uint64, self.config.bands))
                    else:
                        views.append(to_numpy(chunk))
            if name == "keys":
                empty = np.zeros((0, self.config.bands), np.uint64)
            else:
                empty = np.zeros(0, {"source": np.int32, "score": np.float64}.get(name, np.int64))
            self._columns[name] = np.concatenate(views).astype(empty.dtype, copy=False) if views else empty
        return self._columns[name]

    def band_keys(self, first: int, stop: int) -> np.ndarray:
        """The (n, stop - first) uint64 keys of bands first..stop-1 of every document, read block
        by block (not kept: :func:`neardup.kernels.bands.bucket_runs` asks for a few bands at a time)."""
        if "keys" in self._columns:
            return self._columns["keys"][:, first:stop]
        out = np.empty((self.n, stop - first), dtype=np.uint64)
        at = 0
        for b in range(len(self.blocks)):
            for chunk in self.table(b, ["keys"]).column(0).chunks:
                view = fixed_binary_numpy(chunk, np.uint64, self.config.bands)
                out[at:at + len(view)] = view[:, first:stop]
                at += len(view)
        if at != self.n:
            raise RuntimeError("internal error: the blocks' keys do not add up to the documents")
        return out

    def ids(self) -> pa.Array:
        parts = [self.table(b, ["id"]).column(0) for b in range(len(self.blocks))]
        chunks = [c for p in parts for c in p.chunks]
        return pa.concat_arrays(chunks) if chunks else arrow([], pa.string())

    def rejected_records(self) -> List[list]:
        """[source, row or None, reason] of every record that could not be read, in file order."""
        out = []
        for s in self.summaries:
            out.extend(s["rejected"])
        return out

    def per_source(self, n_sources: int) -> List[int]:
        out = [0] * n_sources
        for s in self.summaries:
            for si, n in s["per_source"].items():
                out[int(si)] += n
        return out


def fixed_binary_numpy(arr, dtype, width: int) -> np.ndarray:
    """A fixed_size_binary column as an (n, width) numpy view of ``dtype``."""
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks() if arr.num_chunks != 1 else arr.chunk(0)
    n = len(arr)
    if n == 0:
        return np.zeros((0, width), dtype)
    item = np.dtype(dtype).itemsize * width
    buf = np.frombuffer(arr.buffers()[1], dtype=np.uint8)[arr.offset * item:(arr.offset + n) * item]
    return buf.view(dtype).reshape(n, width)


def numpy_fixed_binary(mat: np.ndarray) -> pa.Array:
    """An (n, width) numpy array as a fixed_size_binary column (one copy)."""
    mat = np.ascontiguousarray(mat)
    n = mat.shape[0]
    width = mat.shape[1] * mat.dtype.itemsize if mat.ndim == 2 else mat.dtype.itemsize
    return pa.Array.from_buffers(pa.binary(width), n, [None, pa.py_buffer(mat.tobytes())])


# --------------------------------------------------------------------------- reading back


class DocStore:
    """Per-document data of any documents, read from the blocks' files: signatures, raw shingle
    hashes, and the columns of the Arrow shard. Picklable (paths and offsets only), so that a
    Ray task gets one; the files are opened on demand."""

    REMOTE_TABLES = 8  # columns of Arrow shards kept in memory when the work dir is remote (one GET each otherwise)

    def __init__(self, work_path: str, block_start: np.ndarray, num_perm: int):
        self.work_path = work_path
        self.block_start = np.asarray(block_start, dtype=np.int64)
        self.num_perm = num_perm
        self._code_offsets: Dict[int, Tuple[np.ndarray, np.ndarray]] = {}
        self._tables: "OrderedDict[int, pa.Table]" = OrderedDict()

    @classmethod
    def of_block(cls, work_path: str, block: int, n: int, num_perm: int) -> "DocStore":
        """A store of one block of ``n`` documents, its documents numbered from 0, for a block
        just read (before the corpus it belongs to is known: the ``--against`` matching)."""
        start = np.zeros(block + 2, np.int64)
        start[-1] = n
        return cls(work_path, start, num_perm)

    def __getstate__(self):
        state = dict(self.__dict__)
        state["_tables"] = OrderedDict()  # a cache, not sent to Ray tasks
        return state

    def _path(self, block: int, ext: str) -> str:
        return block_path(self.work_path, block, ext)

    def source_rows(self, block: int, si: int) -> np.ndarray:
        """The rows of source ``si``'s documents (it lies whole in ``block``), in file order."""
        t = self.table(block, ["source", "row"])
        mask = to_numpy(t.column("source")) == si
        return to_numpy(t.column("row"))[mask]

    def _by_block(self, docs: np.ndarray):
        docs = np.asarray(docs, dtype=np.int64)
        blk = np.searchsorted(self.block_start, docs, side="right") - 1
        for b in unique(blk).tolist():
            sel = np.flatnonzero(blk == b)
            yield b, sel, docs[sel] - self.block_start[b]

    def table(self, block: int, columns: List[str]) -> pa.Table:
        return ranges.arrow_columns(self._path(block, "arrow"), columns, self._tables, self.REMOTE_TABLES)

    def columns(self, docs: np.ndarray, columns: List[str]) -> Dict[str, np.ndarray]:
        """Numeric columns of ascending ``docs``."""
        out = {c: [] for c in columns}
        for b, _sel, local in self._by_block(docs):
            t = self.table(b, columns)
            for c in columns:
                out[c].append(to_numpy(t.column(c).take(arrow(local))))
        return {c: (np.concatenate(v) if v else np.zeros(0)) for c, v in out.items()}

    def ids(self, docs: np.ndarray) -> pa.Array:
        parts = []
        for b, _sel, local in self._by_block(docs):
            parts.append(self.table(b, ["id"]).column(0).take(arrow(local)).combine_chunks())
        return pa.concat_arrays(parts) if parts else arrow([], pa.string())

    def signatures(self, docs: np.ndarray) -> np.ndarray:
        """(len(docs), num_perm) uint32 for ascending docs."""
        k = self.num_perm
        parts = []
        for b, _sel, local in self._by_block(docs):
            _, vals = ranges.read_rows(self._path(b, "sig"), local * k, (local + 1) * k, np.uint32)
            parts.append(vals.reshape(-1, k))
        if len(parts) == 1:  # one block (the usual case): no second copy
            return parts[0]
        return np.concatenate(parts) if parts else np.zeros((0, k), np.uint32)

    def _codes(self, block: int) -> Tuple[np.ndarray, np.ndarray]:
        """(fingerprints of each document, byte offsets of their codes in the block's .fp file)."""
        if block not in self._code_offsets:
            counts = to_numpy(self.table(block, ["count"]).column(0)).astype(np.int64, copy=False)
            off = np.zeros(len(counts) + 1, dtype=np.int64)
            np.cumsum(eliasfano.code_bytes(counts), out=off[1:])
            self._code_offsets[block] = (counts, off)
        return self._code_offsets[block]

    def fingerprints(self, docs: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
        """Shingle fingerprints (uint32, the high halves of the shingle hashes, repeats kept, in
        the order of their codes: see :mod:`neardup.kernels.eliasfano`) of ascending docs, as CSR by
        position in docs."""
        offs, vals = [np.zeros(1, np.int64)], []
        base = 0
        for b, _sel, local in self._by_block(docs):
            counts, off = self._codes(b)
            starts, data = ranges.read_rows(self._path(b, "fp"), off[local], off[local + 1], np.uint8)
            o, v = eliasfano.decode(starts[:-1], data, counts[local])
            offs.append(o[1:] + base)
            base += len(v)
            vals.append(v)
        if len(vals) == 1:  # one block (the usual case): no second copy of the hashes
            return np.concatenate(offs), vals[0]
        return np.concatenate(offs), (np.concatenate(vals) if vals else np.zeros(0, np.uint32))


def document_ids(source: np.ndarray, row: np.ndarray, user_ids: Optional[pa.Array],
                 sources: Sequence[nio.Source]) -> pa.Array:
    """The id of each document: the user's id column, the path of a text file, 'PATH:LINE' for
    JSONL (lines counted from 1, as in an editor and in neardup's messages) or 'PATH:ROW' for
    Parquet and tables (rows counted from 0, as in pyarrow and pandas, and as messages say
    'row N'). PATH is the file's path below the root of kept/ (``Source.relpath``: relative to
    the inputs' longest common folder), so an id does not depend on how the path was typed
    (``./docs.csv``, ``docs.csv``, ``/abs/docs.csv`` give ``docs.csv:3``) and names the same file
    as kept/ does; messages keep the path as typed."""
    if user_ids is not None:
        return user_ids.cast(pa.string())
    out = []
    for s, r in zip(source.tolist(), row.tolist()):
        src = sources[s]
        path = src.name if src.format == "table" else src.relpath
        if src.format == "text":
            out.append(path)
        else:
            out.append(f"{path}:{r + 1 if src.format == 'jsonl' else r}")
    return arrow(out, pa.string())
