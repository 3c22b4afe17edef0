"""The work directory: the contract between the stages, and the only thing the drivers know.

Every stage reads the files of the stages before it and writes its own, in one layout whichever
engine runs it, so that a run interrupted under one engine is finished by the other with
``--resume``. Inside the read stage every block is a partition of its own: a block whose summary
file exists is done and is not read again.

    WORK/state.json                 fingerprint of config + inputs, the stages done and their counts
    WORK/read/plan.json             the blocks: runs of consecutive input files (a file is never split)
    WORK/read/block-BBBBBB.arrow    Arrow IPC file, DOCS_SCHEMA: one row per document of the block
    WORK/read/block-BBBBBB.sig      raw uint32, num_perm per document (verify = estimate | none)
    WORK/read/block-BBBBBB.fp       uint32 shingle fingerprints (the high halves of the 64-bit
                                    shingle hashes) in text order, ``count`` per document
                                    (verify = exact)
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

import hashlib
import json
from typing import Dict, List, Optional, Sequence

import numpy as np
import pyarrow as pa

from ..arrays import arrow, to_numpy
from ..errors import ConfigError
from ..io import fs
from ..io.folder import Folder
from ..io.tables import read_table

STAGES = ("read", "pairs", "clusters", "write")
LAYOUT_VERSION = 3              # 3: shingle fingerprints (.fp, uint32) instead of 64-bit hashes (.sh)
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


def run_identity(config, sources) -> dict:
    """A run's identity: the options that change its result (:meth:`Config.identity`: not those
    of the Execution group, so that a run may be resumed with other workers, engine or batch
    size), and each input's name, size and modification time. Kept in state.json, so that a
    refused ``--resume`` can say what differs."""
    relevant = config.identity()
    relevant["against"] = [fs.redact(a) for a in relevant.get("against") or ()]  # state.json stores no password
    files = []
    infos = _remote_infos([s.path for s in sources if s.format != "table"])
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


_LAST_INFOS: Dict[str, "fs.FileInfo"] = {}  # of the remote inputs of the last fingerprint, for plan_blocks


def _remote_infos(paths: Sequence[str]) -> Dict[str, "fs.FileInfo"]:
    """Size and time of the inputs (see :func:`neardup.io.fs.infos`); kept for the plan of the
    same run."""
    out = fs.infos(paths)
    _LAST_INFOS.clear()
    _LAST_INFOS.update(out)
    return out


def plan_blocks(sources: Sequence, block_bytes: Optional[int] = None) -> List[List[int]]:
    """Runs of consecutive sources of about ``block_bytes`` (default BLOCK_BYTES) of input each
    (a source is never split). The plan depends on the inputs only, so that every engine cuts the
    same blocks."""
    block_bytes = BLOCK_BYTES if block_bytes is None else block_bytes
    blocks: List[List[int]] = []
    acc = 0
    for si, s in enumerate(sources):
        size = s.table.nbytes if s.format == "table" else (_LAST_INFOS.get(s.path) or fs.info(s.path)).size
        if not blocks or (blocks[-1] and acc + size > block_bytes):
            blocks.append([])
            acc = 0
        blocks[-1].append(si)
        acc += size
    return blocks


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
    ``.neardup``, kind ``work-dir``, format LAYOUT_VERSION: see :mod:`neardup.io.folder`).

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

    @property
    def is_remote(self) -> bool:
        return self.folder.is_remote

    def _save(self) -> None:
        write_json(fs.join(self.path, "state.json"), self.state)

    def is_done(self, stage: str) -> bool:
        return stage in self.state["done"]

    def info(self, stage: str) -> dict:
        return self.state["done"][stage]

    def mark_done(self, stage: str, info: Optional[dict] = None) -> None:
        self.state["done"][stage] = info or {}
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
        blocks = plan_blocks(sources)
        write_json(path, blocks)
        return blocks

    def block_summary(self, block: int) -> Optional[dict]:
        try:
            return read_json(self.block_path(block, "json"))
        except (OSError, ValueError):
            return None

    def part_path(self, stage: str, part: int) -> str:
        return fs.join(self.path, stage, f"part-{part:05d}.parquet")

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
        by block (not kept: :func:`neardup.bands.bucket_runs` asks for a few bands at a time)."""
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
