"""The read stage's result as a whole (:class:`Corpus`), any documents' data read back from it
(:class:`DocStore`: signatures, shingle fingerprints, the columns of the Arrow shards), and the
id of each document (:func:`document_ids`)."""

from __future__ import annotations

import threading
from collections import OrderedDict
from concurrent.futures import ThreadPoolExecutor
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np
import pyarrow as pa

from .. import io as nio
from ..io.columns import id_path, positional_ids
from ..io.splits import range_lines
from ..io.storage.folder import Folder
from ..kernels.arrays import arrow, arrow_take, cast_strings, take_array, take_rows, to_numpy, unique
from .background import Background
from .workdir import WorkDir, block_name

CODE_THREADS = 2  # threads copying the fingerprint codes of local blocks (DocStore.codes)
ROW_RUNS = 1024  # runs of (source, row) a block's summary keeps at most (add_row_runs): more, none kept


def code_threads() -> int:
    """The cores this call may use: numba's thread count in this thread, which the engines set
    to a call's share (:class:`neardup.kernels.hashing.kernel_threads`: a 1-CPU Ray task's is 1,
    so that it does not copy in two threads on a core it shares)."""
    import numba
    return numba.get_num_threads()


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
        # the ranges of a split file number their rows from 0: each one's first line, added to
        # its rows wherever they are read (:func:`neardup.io.splits.range_lines`)
        self.row_base = np.asarray(range_lines(blocks, self.summaries, work.ranges()), np.int64)
        # each block's runs of (source, row) (add_row_runs) as its summary holds them, None where
        # it has none: read by DocStore.run_table alone, which makes its one table of them
        self.row_runs = [s.get("runs") for s in self.summaries]
        self._columns: Dict[str, np.ndarray] = {}

    def table(self, block: int, columns: Optional[List[str]] = None) -> pa.Table:
        return with_row_base(self.work.folder.read_table(block_name(block, "arrow"), columns),
                             int(self.row_base[block]))

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

    def key_parts(self) -> List[np.ndarray]:
        """The band keys of every document where they lie: a (rows, bands) uint64 view of each
        chunk of each block's key column, in document order (of its memory-mapped file when the
        work dir is local: nothing read until used; :func:`neardup.kernels.bands.bucket_runs`)."""
        if "keys" in self._columns:
            return [self._columns["keys"]]
        return [fixed_binary_numpy(chunk, np.uint64, self.config.bands)
                for b in range(len(self.blocks)) for chunk in self.table(b, ["keys"]).column(0).chunks]

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
        for b, s in enumerate(self.summaries):
            base = int(self.row_base[b])
            out.extend(s["rejected"] if not base else
                       [[si, row if row is None else row + base, reason] for si, row, reason in s["rejected"]])
        return out

    def per_source(self, n_sources: int) -> List[int]:
        out = [0] * n_sources
        for s in self.summaries:
            for si, n in s["per_source"].items():
                out[int(si)] += n
        return out


def with_row_base(table: pa.Table, base: int) -> pa.Table:
    """``table`` (columns of a block's Arrow file) with ``base`` added to its ``row`` column,
    if it has one (a range of a split file: its rows numbered from 0 there)."""
    if not base or "row" not in table.column_names:
        return table
    i = table.column_names.index("row")
    rows = table.column(i)
    if rows.null_count or not pa.types.is_integer(rows.type):
        import pyarrow.compute as pc
        return table.set_column(i, "row", pc.add(rows, pa.scalar(base, pa.int64())))
    # in numpy: pa.scalar (and pc.add given a Python or numpy number) imports pandas on first use,
    # 0.08-0.13 s of a run (the clusters stage's first block read, quiet roofline of session 40)
    return table.set_column(i, "row", arrow(to_numpy(rows).astype(np.int64) + np.int64(base)))


def add_row_runs(summary: dict, source: np.ndarray, rows: np.ndarray) -> None:
    """A batch's documents (the ``source`` and ``row`` of each, the batch's first document
    ``summary["documents"]`` of its block) added to the summary's ``runs``: [document, source,
    row] of each run's first document, a run's rows going on by one a document in one source
    (a JSONL file: a run from each rejected record or blank line to the next); None once there
    are more than ROW_RUNS (many small files), as in a work dir of a version that kept none. The
    clusters stage finds its members' sources and rows from them (:meth:`DocStore.source_rows_of`)
    rather than reading those columns of every block."""
    runs = summary.get("runs")
    if runs is None or not len(rows):
        return
    source, rows = np.asarray(source, np.int64), np.asarray(rows, np.int64)
    starts = np.concatenate([[0], np.flatnonzero((source[1:] != source[:-1]) | (rows[1:] != rows[:-1] + 1)) + 1])
    new = np.stack([starts + summary["documents"], source[starts], rows[starts]], axis=1).tolist()
    if runs and new[0][1] == runs[-1][1] and new[0][2] - runs[-1][2] == new[0][0] - runs[-1][0]:
        new = new[1:]  # the last batch's run goes on
    summary["runs"] = runs + new if len(runs) + len(new) <= ROW_RUNS else None


def column(table: pa.Table, name: str, dtype=np.int64) -> np.ndarray:
    """One column of a table as a numpy array of ``dtype`` (one copy at most)."""
    return to_numpy(table.column(name).combine_chunks()).astype(dtype, copy=False)


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
    hashes, and the columns of the Arrow shard. Picklable (the work dir's Folder and offsets
    only), so that a Ray task gets one; the files are opened on demand."""

    REMOTE_TABLES = 8  # columns of Arrow shards kept in memory when the work dir is remote (one GET each otherwise)

    def __init__(self, work: Folder, block_start: np.ndarray, num_perm: int,
                 row_base: Optional[np.ndarray] = None, row_runs: Optional[List[Optional[list]]] = None):
        self.work = work
        self.block_start = np.asarray(block_start, dtype=np.int64)
        self.num_perm = num_perm
        self.row_base = None if row_base is None else np.asarray(row_base, np.int64)  # Corpus.row_base
        self.row_runs = row_runs  # Corpus.row_runs
        self._code_offsets: Dict[int, Tuple[np.ndarray, np.ndarray]] = {}
        self._counts: Optional[np.ndarray] = None  # every document's, when held (:meth:`hold_counts`)
        self._tables: "OrderedDict[int, pa.Table]" = OrderedDict()
        self._ahead: Optional["OpenedBlocks"] = None  # the blocks' files opened ahead (:meth:`open_ahead`)
        self._runs: Optional[Tuple[np.ndarray, np.ndarray, np.ndarray]] = None  # :meth:`run_table`, once made
        # Whether a block's rows (and the clusters stage's ids) are taken by Arrow's take: set where
        # pyarrow.compute is imported for them (a run of more than NUMPY_UP_TO documents, in a
        # thread from the pair stage's start: :func:`neardup.stages.clusters.compute_ahead`; an
        # import still running is waited for by the take's own), as its take of a block's strings
        # reads them where they lie, chunk by chunk, where :func:`take_rows` copies the block's
        # whole column into one chunk first and gathers its bytes by an index a byte (the 1M
        # corpus's 214,229 cluster members' ids from 36 blocks: ~6.5 against ~14 thread-CPU-ms,
        # the blocks' opens in both). The same values either way; a run that never imports it
        # pays no import for this.
        self.arrow_takes = False
        # the clusters stage's files opened from the pair stage's verification
        # (:func:`neardup.stages.clusters.start_ahead`), not to be opened again at its end
        self.opened_early = False

    @classmethod
    def of_block(cls, work: Folder, block: int, n: int, num_perm: int) -> "DocStore":
        """A store of one block of ``n`` documents, its documents numbered from 0, for a block
        just read (before the corpus it belongs to is known: the ``--against`` matching)."""
        start = np.zeros(block + 2, np.int64)
        start[-1] = n
        return cls(work, start, num_perm)

    def __getstate__(self):
        state = dict(self.__dict__)
        state["_tables"] = OrderedDict()  # a cache, not sent to Ray tasks
        state["_counts"] = None  # the driver's corpus column: a task reads its blocks' counts
        state["_ahead"] = None  # files open in this process
        state["_runs"] = None  # made again where asked for (up to ROW_RUNS a block)
        return state

    def open_ahead(self, columns: List[str], with_ids: bool) -> None:
        """A local work dir's blocks' files opened from now, in a thread (:class:`OpenedBlocks`),
        for the ``columns`` (and ids) of their members that the clusters stage reads: called at
        the pair stage's end (past NUMPY_UP_TO documents from its verification's start:
        :func:`neardup.stages.clusters.start_ahead`), so that the files are open before that
        stage starts in this process (:meth:`opened_blocks` hands them to it)."""
        self.close()  # (files opened ahead before, not taken: let go)
        if self.work.os_path is not None:
            self._ahead = OpenedBlocks(self, columns, with_ids)

    def close(self) -> None:
        """Lets go of the blocks' files :meth:`open_ahead` opened and no stage took (their thread
        stopped): the run's end calls it, so that a run stopped between the pair stage's end and
        the clusters stage (an interrupt, an error) leaves none open."""
        ahead, self._ahead = self._ahead, None
        if ahead is not None:
            ahead.close()

    def opened_blocks(self, columns: List[str], with_ids: bool) -> Optional["OpenedBlocks"]:
        """The blocks' files opened for ``columns`` and ids: those :meth:`open_ahead` opened for
        the same (then no longer held here), else opened from now (a local work dir; None for a
        remote one, whose tables are fetched and cached by the gathering thread alone)."""
        ahead = self._ahead
        if ahead is not None and (ahead.columns, ahead.with_ids) == (columns, with_ids):
            self._ahead = None
            return ahead
        self.close()
        return OpenedBlocks(self, columns, with_ids) if self.work.os_path is not None else None

    def source_rows(self, block: int, si: int) -> np.ndarray:
        """The rows of source ``si``'s documents (it lies whole in ``block``), in file order."""
        t = self.table(block, ["source", "row"])
        mask = to_numpy(t.column("source")) == si
        return to_numpy(t.column("row"))[mask]

    def source_rows_of(self, block: int, local: np.ndarray) -> Optional[Tuple[np.ndarray, np.ndarray]]:
        """The source (int32) and row (int64, the row base added) of a block's documents ``local``
        (ascending) from its runs (:func:`add_row_runs`), no file read; None when it has none."""
        if not has_runs(self, block):
            return None
        return self.source_rows_at(np.asarray(local, np.int64) + self.block_start[block])

    def source_rows_at(self, docs: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
        """The source (int32) and row (int64, the row base added) of ascending ``docs`` of any
        blocks from their runs (:meth:`run_table`), in one pass, no file read; source -1 (and a
        row of no meaning) for the documents of a block without runs."""
        first, source, row = self.run_table()
        if len(docs):  # the runs from the first document's to the last's alone (a block's: the write stage's call a block)
            lo = max(int(np.searchsorted(first, docs[0], side="right")) - 1, 0)
            hi = int(np.searchsorted(first, docs[-1], side="right"))
            first, source, row = first[lo:hi], source[lo:hi], row[lo:hi]
        # how many of the documents each run holds (those from its first document to the next
        # run's), each run's values repeated so many times: no run index per document made and
        # read (each array of the members' size is fresh memory faulted in: ~1.7 MB at 1M documents)
        counts = np.diff(np.append(np.searchsorted(docs, first), len(docs)))
        rows = np.repeat(row, counts)
        rows += docs
        return np.repeat(source, counts), rows

    def run_table(self) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Every block's runs (:func:`add_row_runs`) as one table over the corpus (made once):
        the first document of each run, its source (int32; -1 for the one run of a block
        without runs) and its first row less its first document (the row base added), so that
        a document's row is that plus the document."""
        if self._runs is None:
            first, source, row = [np.zeros(0, np.int64)], [np.zeros(0, np.int64)], [np.zeros(0, np.int64)]
            for b in range(len(self.block_start) - 1):
                runs = np.asarray(self.row_runs[b] if has_runs(self, b) else [[0, -1, 0]], np.int64).reshape(-1, 3)
                base = 0 if self.row_base is None else self.row_base[b]
                first.append(runs[:, 0] + self.block_start[b])
                source.append(runs[:, 1])
                row.append(runs[:, 2] + base - first[-1])
            self._runs = np.concatenate(first), np.concatenate(source).astype(np.int32), np.concatenate(row)
        return self._runs

    def _by_block(self, docs: np.ndarray):
        docs = np.asarray(docs, dtype=np.int64)
        blk = np.searchsorted(self.block_start, docs, side="right") - 1
        for b in unique(blk).tolist():
            sel = np.flatnonzero(blk == b)
            yield b, sel, docs[sel] - self.block_start[b]

    def table(self, block: int, columns: List[str], rows: Optional[np.ndarray] = None,
              opened: Optional[pa.Table] = None) -> pa.Table:
        """``columns`` of a block's shard; ``rows``: of those rows alone (taken before the row
        base is added: a copy of them, not of the block's whole row column); ``opened``: those
        columns as :meth:`opened` gave them, its file opened ahead (:class:`OpenedBlocks`)."""
        t = opened if opened is not None else self.opened(block, columns)
        if rows is not None:
            t = arrow_take(t, rows) if self.arrow_takes else take_rows(t, rows)
        return t if self.row_base is None else with_row_base(t, int(self.row_base[block]))

    def opened(self, block: int, columns: List[str]) -> pa.Table:
        """``columns`` of a block's shard as its file has them (no row base added)."""
        return self.work.arrow_columns(block_name(block, "arrow"), columns, self._tables, self.REMOTE_TABLES)

    def columns(self, docs: np.ndarray, columns: List[str]) -> Dict[str, np.ndarray]:
        """Numeric columns of ascending ``docs``."""
        out = {c: [] for c in columns}
        for b, _sel, local in self._by_block(docs):
            t = self.table(b, columns)
            for c in columns:
                out[c].append(to_numpy(t.column(c).take(arrow(local))))
        return {c: (np.concatenate(v) if v else np.zeros(0)) for c, v in out.items()}

    def columns_and_ids(self, docs: np.ndarray, columns: List[str],
                        with_ids: bool) -> Tuple[Dict[str, np.ndarray], Optional[pa.Array]]:
        """:meth:`columns` and, ``with_ids``, :meth:`ids` of ascending ``docs`` (the same values),
        read by :class:`MemberColumns` in this thread alone."""
        gathering = MemberColumns(self, docs, columns, with_ids)
        gathering.take()
        return gathering.result()

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
            _, vals = self.work.read_rows(block_name(b, "sig"), local * k, (local + 1) * k, np.uint32)
            parts.append(vals.reshape(-1, k))
        if len(parts) == 1:  # one block (the usual case): no second copy
            return parts[0]
        return np.concatenate(parts) if parts else np.zeros((0, k), np.uint32)

    def hold_counts(self, counts: np.ndarray) -> None:
        """The fingerprints of every document (int64, :meth:`Corpus.column` ``"count"``, which
        the caller holds): the blocks' code offsets made from them (:meth:`_codes`), no block's
        count column read again (~0.05 CPU-s at 1M documents)."""
        self._counts = counts

    def _codes(self, block: int) -> Tuple[np.ndarray, np.ndarray]:
        """(fingerprints of each document, byte offsets of their codes in the block's .fp file)."""
        if block not in self._code_offsets:
            from ..kernels import eliasfano
            if self._counts is not None:
                counts = self._counts[self.block_start[block]:self.block_start[block + 1]]
            else:
                counts = to_numpy(self.table(block, ["count"]).column(0)).astype(np.int64, copy=False)
            off = np.zeros(len(counts) + 1, dtype=np.int64)
            np.cumsum(eliasfano.code_bytes(counts), out=off[1:])
            self._code_offsets[block] = (counts, off)
        return self._code_offsets[block]

    def codes(self, docs: np.ndarray, room: Optional[list] = None) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The Elias-Fano codes of the fingerprints of ascending docs, undecoded: (starts, data,
        counts), document i's code at ``data[starts[i]:]`` (:func:`neardup.kernels.eliasfano.decode`).
        A local block's codes are copied out of its memory map (closed after; CODE_THREADS blocks at a time);
        a store's are read in ranged GETs (:meth:`Folder.read_rows`) and copied into place.
        ``room``: ``[buffer or None]``, kept by a caller that reads chunk after chunk: ``data`` is a
        view of the buffer when it is large enough (its pages are not faulted in and zeroed again),
        else the buffer is let go before a larger one is made and put there (one held at a time)."""
        from ..kernels.ranges import copy_ranges
        docs = np.asarray(docs, dtype=np.int64)
        starts = np.empty(len(docs), np.int64)
        counts = np.empty(len(docs), np.int64)
        blocks = list(self._by_block(docs))
        sizes = [int((self._codes(b)[1][local + 1] - self._codes(b)[1][local]).sum()) for b, _, local in blocks]
        total = sum(sizes)
        if room is None:
            data = np.empty(total, np.uint8)
        else:
            if room[0] is None or len(room[0]) < total:
                room[0] = None  # let go before the larger one is made
                room[0] = np.empty(total, np.uint8)
            data = room[0][:total]
        bases = np.concatenate([[0], np.cumsum(sizes, dtype=np.int64)]).tolist()

        def fill(j):
            (b, sel, local), size, base = blocks[j], sizes[j], bases[j]
            cnt, off = self._codes(b)
            counts[sel] = cnt[local]
            first, stop = off[local], off[local + 1]
            at = np.zeros(len(local) + 1, np.int64)
            np.cumsum(stop - first, out=at[1:])
            if self.work.os_path is not None and size:
                # a local file: its memory map, the codes copied out and the map closed (only the
                # pages of the codes wanted are touched, no read of the gaps between them)
                mapped = self.work.map_array(block_name(b, "fp"), np.uint8)
                copy_ranges(mapped, 0, first, stop, at, 0, len(local), data[base:base + size])
                del mapped
            elif size:
                data[base:base + size] = self.work.read_rows(block_name(b, "fp"), first, stop, np.uint8)[1]
            starts[sel] = at[:-1] + base

        threads = min(CODE_THREADS, code_threads())
        if self.work.os_path is not None and len(blocks) > 1 and threads > 1:
            # local blocks copied in CODE_THREADS threads (the copy releases the GIL; the page
            # faults of the memory maps are the cost), each block's map closed after its copy
            with ThreadPoolExecutor(threads) as pool:
                list(pool.map(fill, range(len(blocks))))
        else:
            for j in range(len(blocks)):
                fill(j)
        return starts, data, counts

    def code_places(self, docs: np.ndarray) -> Tuple[np.ndarray, np.ndarray, np.ndarray, Dict[int, int]]:
        """Where the Elias-Fano codes of ascending docs lie, for a local work dir: (block, starts,
        counts, sizes), document i's code at byte ``starts[i]`` of block ``block[i]``'s .fp file
        (:meth:`code_map`), ``counts[i]`` fingerprints; ``sizes`` the bytes of the file of each
        block holding any of them. Nothing is read but the blocks' counts (none when held:
        :meth:`hold_counts`)."""
        docs = np.asarray(docs, dtype=np.int64)
        block = np.empty(len(docs), np.int64)
        starts = np.empty(len(docs), np.int64)
        counts = np.empty(len(docs), np.int64)
        sizes = {}
        for b, sel, local in self._by_block(docs):
            cnt, off = self._codes(b)
            block[sel] = b
            counts[sel] = cnt[local]
            starts[sel] = off[local]
            sizes[b] = int(off[-1])
        return block, starts, counts, sizes

    def code_map(self, block: int) -> np.ndarray:
        """A local block's .fp file memory-mapped (closed when let go): its codes read where they
        lie, no buffer made and filled (:meth:`codes`); the file's pages are the page cache's,
        counted in the process's resident set while mapped and touched."""
        return self.work.map_array(block_name(block, "fp"), np.uint8)

    def fingerprints(self, docs: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
        """Shingle fingerprints (uint32, the high halves of the shingle hashes, repeats kept, in
        the order of their codes: see :mod:`neardup.kernels.eliasfano`) of ascending docs, as CSR by
        position in docs."""
        from ..kernels import eliasfano
        offs, vals = [np.zeros(1, np.int64)], []
        base = 0
        for b, _sel, local in self._by_block(docs):
            counts, off = self._codes(b)
            starts, data = self.work.read_rows(block_name(b, "fp"), off[local], off[local + 1], np.uint8)
            o, v = eliasfano.decode(starts[:-1], data, counts[local])
            offs.append(o[1:] + base)
            base += len(v)
            vals.append(v)
        if len(vals) == 1:  # one block (the usual case): no second copy of the hashes
            return np.concatenate(offs), vals[0]
        return np.concatenate(offs), (np.concatenate(vals) if vals else np.zeros(0, np.uint32))


class OpenedBlocks:
    """The files of a local work dir's blocks opened ahead, in block order, by a thread of its own
    (:class:`Background`), for the columns of each that :class:`MemberColumns` reads: started
    before its documents are known (the pair stage's end, :meth:`DocStore.open_ahead`, or the
    clusters stage's start, while it reads the pairs and finds their documents), so that the gathering takes from files already open (an open ~0.15-0.3
    ms a block, 36 blocks at 1M documents). Once :meth:`only` has the blocks wanted, no other is
    opened; a block a taker claims (:meth:`pop`) before its open starts is opened by the taker,
    not here; one claimed while it is being opened here is waited for (each file opened once:
    none opened by both, none held unused until the close). :meth:`close` stops the thread and
    lets go of the files not taken. One lock (:attr:`lock`) guards the claims, the tables and
    the block being opened; no open is made under it."""

    def __init__(self, store: DocStore, columns: List[str], with_ids: bool):
        self.store, self.columns, self.with_ids = store, columns, with_ids
        self.tables: Dict[int, pa.Table] = {}
        self.claimed: set = set()
        self.wanted: Optional[set] = None
        self.closed = False
        self.opening: Optional[int] = None  # the block being opened by the thread
        self.lock = threading.Condition()
        self.job = Background(self._open, "neardup-open-blocks")

    def _open(self) -> None:
        for b in range(len(self.store.block_start) - 1):
            with self.lock:
                if self.closed:
                    return
                if b in self.claimed or (self.wanted is not None and b not in self.wanted):
                    continue
                self.opening = b
            table = None
            try:
                wanted = file_columns(self.store, b, self.columns, self.with_ids)
                if wanted:
                    table = self.store.opened(b, wanted)
            finally:  # a failed open: the taker opens it (and gets the error)
                with self.lock:
                    if table is not None:
                        self.tables[b] = table
                    self.opening = None
                    self.lock.notify_all()

    def only(self, blocks: Sequence[int]) -> None:
        with self.lock:
            self.wanted = set(blocks)

    def pop(self, block: int) -> Optional[pa.Table]:
        """The block's table if it is open (then no longer held here), waited for while it is
        being opened, else None: the caller opens it."""
        with self.lock:
            self.claimed.add(block)
            while self.opening == block:
                self.lock.wait()
            return self.tables.pop(block, None)

    def close(self) -> None:
        with self.lock:
            self.closed = True
        self.job.wait()
        self.tables.clear()


def has_runs(store: DocStore, block: int) -> bool:
    """Whether the block's summary keeps its runs of sources and rows (:func:`add_row_runs`)."""
    return store.row_runs is not None and store.row_runs[block] is not None


def file_columns(store: DocStore, block: int, columns: List[str], with_ids: bool) -> List[str]:
    """The columns :class:`MemberColumns` reads of a block's file: ``columns`` but the sources and
    rows where the block's runs give them (:meth:`DocStore.source_rows_at`), and the ids ``with_ids``."""
    runs = "source" in columns and has_runs(store, block)
    return [c for c in columns if not (runs and c in ("source", "row"))] + (["id"] if with_ids else [])


class MemberColumns:
    """The columns and ids of ascending ``docs`` (:meth:`DocStore.columns_and_ids`), read block
    by block by whichever threads call :meth:`take`: the clusters stage's thread that gathers
    them while the selection's kernel runs, and the stage's own thread once it asks for them
    before they are all read (:func:`neardup.stages.clusters.in_thread`): the opens and takes
    release the GIL, the page faults of the blocks' memory maps are the cost (at 1M documents
    under load: ~25 thread-CPU-ms of gathering beside ~10 of the kernel). The sources and rows
    come from the blocks' runs where their summaries have them (12 of the 21.9 MB of pages of
    the 1M corpus's members not touched), for every block at once, by the first thread to come
    (:meth:`DocStore.source_rows_at`: one pass over ``docs``, ~1 thread-CPU-ms at 1M documents
    where a pass a block took ~4.5); each block's file is
    opened once for the other columns and ids (or was, by ``opened``: :class:`OpenedBlocks`), its
    documents found by a binary search (they are a run of ``docs``) and taken from all its columns at once, before the row base is added: no column
    of a block copied whole, no pass over ``docs`` per block (214,229 cluster members over 35
    blocks: ~12 ms against 33 for :meth:`DocStore.columns` then :meth:`DocStore.ids`; ~15 ms
    against ~17 picking each record batch's rows one column at a time with the row base added
    to the whole block, under load)."""

    def __init__(self, store: DocStore, docs: np.ndarray, columns: List[str], with_ids: bool,
                 opened: Optional[OpenedBlocks] = None):
        self.store, self.columns, self.with_ids, self.opened = store, columns, with_ids, opened
        self.docs = np.asarray(docs, dtype=np.int64)
        self.bounds = np.searchsorted(self.docs, store.block_start).tolist()
        self.blocks = [b for b in range(len(self.bounds) - 1) if self.bounds[b] < self.bounds[b + 1]]
        if opened is not None:
            opened.only(self.blocks)
        self.values: List[Optional[dict]] = [None] * len(self.blocks)  # each block's values by column
        # the sources and rows of every block that has runs, at once (item -1 of the work)
        self.from_runs: Optional[Tuple[np.ndarray, np.ndarray]] = None
        runs = "source" in columns and any(has_runs(store, b) for b in self.blocks)
        self._left = iter(range(-1 if runs else 0, len(self.blocks)))
        self.shared = store.work.os_path is not None  # a remote work dir's tables are cached: one thread's

    def take(self) -> None:
        """The work no thread has taken yet, each item taken by one thread (``next`` holds the
        GIL): the sources and rows of every block that has runs (item -1), then each block's
        file for the rest."""
        for j in self._left:
            if j < 0:
                self.from_runs = self.store.source_rows_at(self.docs)
                continue
            b = self.blocks[j]
            local = self.docs[self.bounds[b]:self.bounds[b + 1]] - self.store.block_start[b]
            values = {}
            wanted = file_columns(self.store, b, self.columns, self.with_ids)
            if wanted:
                t = self.store.table(b, wanted, local, self.opened.pop(b) if self.opened is not None else None)
                values.update((c, t.column(c) if c == "id" else to_numpy(t.column(c))) for c in wanted)
            self.values[j] = values

    def result(self) -> Tuple[Dict[str, np.ndarray], Optional[pa.Array]]:
        """The values of every column and the ids (None without), once every :meth:`take` is done
        (the files opened ahead and not taken let go)."""
        if self.opened is not None:
            self.opened.close()
        values = {c: self.joined(c) for c in self.columns}
        if not self.with_ids:
            return values, None
        parts = [chunk for t in self.values for chunk in t["id"].chunks]
        return values, (pa.concat_arrays(parts) if parts else arrow([], pa.string()))

    def joined(self, column: str) -> np.ndarray:
        """One column's values of every block: the sources and rows from the runs (those of a
        block without runs put in from its file), the others' blocks one after another."""
        if column in ("source", "row") and self.from_runs is not None:
            out = self.from_runs[column == "row"]
            for j, b in enumerate(self.blocks):
                if column in self.values[j]:  # a block without runs: its file's
                    out[self.bounds[b]:self.bounds[b + 1]] = self.values[j][column]
            return out
        return np.concatenate([t[column] for t in self.values]) if self.values else np.zeros(0)


def document_ids(source: np.ndarray, row: np.ndarray, user_ids: Optional[pa.Array],
                 sources: Sequence[nio.Source], path_of=None) -> pa.Array:
    """The id of each document (``source`` and ``row`` of each): the user's id column, else its
    position by the one rule of every command (:func:`neardup.io.columns.positional_ids`:
    ``PATH:LINE``, ``PATH:ROW``, a text file's path); ``path_of(src)``, when given, the PATH of
    each source (an index's rule for ``--update-index``: :func:`neardup.index.inputs.index_path`)."""
    if user_ids is not None:
        return cast_strings(user_ids, pa.string())
    source = np.asarray(source, dtype=np.int64)
    row = np.asarray(row, dtype=np.int64)
    if len(source) == 0:
        return arrow([], pa.string())
    order = np.argsort(source, kind="stable")
    ordered = source[order]
    cuts = np.flatnonzero(ordered[1:] != ordered[:-1]) + 1
    pieces: list = []
    files: List[str] = []  # the ids of text files in a row: one array, not one a file (100,000 files)
    for a, b in zip([0, *cuts.tolist()], [*cuts.tolist(), len(order)]):
        src = sources[int(ordered[a])]
        path = path_of(src) if path_of else None
        if src.format == "text":
            files += [id_path(src, path)] * (b - a)  # (positional_ids' rule)
            continue
        if files:
            pieces.append(arrow(files, pa.string()))
            files = []
        pieces.append(positional_ids(src, row[order[a:b]], path))
    if files:
        pieces.append(arrow(files, pa.string()))
    back = np.empty(len(order), np.int64)
    back[order] = np.arange(len(order))
    return take_array(pa.concat_arrays(pieces), back)
