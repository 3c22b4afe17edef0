"""Stage ``write``: the output folder, the same bytes whichever engine ran the stages before.

    kept/                 one file per input file (:func:`write_kept_group`, a group of sources at a time)
    marked/               instead of kept/ with ``--mark``: every document, marked (:mod:`.mark`)
    removed.parquet       REMOVED_SCHEMA, in document order        (:func:`removed_records`)
    clusters.parquet      CLUSTERS_SCHEMA, by cluster, then document (:func:`cluster_records`)
                          (both sorted by range in the engine's calls and stitched: :func:`write_members`)
    rejected.parquet      REJECTED_SCHEMA (on_error='skip')        (:func:`rejected_table`)
    texts_sample.parquet  the largest clusters' texts, for the report
    stats.json            :func:`build_stats` + the seconds per stage (written by the run, last:
                          :mod:`neardup.run`)
    files.json            only for a run of more than FILE_LIST_LIMIT input or kept files: the
                          whole lists (stats.json keeps their first FILE_LIST_LIMIT: :func:`bound_lists`)

Every Parquet file is written through :class:`ParquetRows`, whose fixed row groups make the same
rows give the same bytes however they were batched.
"""

from __future__ import annotations

import json
import math
import os
import threading
from bisect import bisect_left
from collections import abc
from functools import partial
from itertools import chain, repeat
from json.encoder import encode_basestring_ascii
from typing import Any, Callable, Dict, List, Optional, Sequence, Set, Tuple

import numpy as np
import pyarrow as pa

from ..kernels.arrays import arrow, arrow_take, take_array, take_rows, to_numpy, unique
from .. import io as nio
from .._version import __version__
from ..io.inputs import INDEX_ID_COLUMN
from ..io.batch import SKIP_KINDS
from ..io.reader import text_column_of, text_columns
from ..io.storage.folder import Folder
from ..progress import bar, check_interrupt, plural
from ..report.output_folder import KeptTally
from .corpus import column
from . import mark as marking  # called through the module: a test's patch of it is seen
from .outputs import (CLUSTERS_SCHEMA, REJECTED_SCHEMA, REMOVED_SCHEMA, SAMPLE_SCHEMA,  # noqa: F401 (re-exported)
                      kept_rows, table_kept_name)
from .background import Background
from .workdir import MEMBERS_SCHEMA, range_name
from .write_lines import (FileStat, block_lines, copies_lines, copies_whole, copy_kept_lines, expected_stats,
                          read_stats, recorded_sizes)


# a run's result, the files it replaces in the output folder (nothing else there is touched)
OUTPUT_FILES = ("kept", "marked", "removed.parquet", "clusters.parquet", "rejected.parquet", "texts_sample.parquet",
                "report.html", "files.json", "stats.json")
FILES_JSON = "files.json"
FILE_LIST_LIMIT = 1000     # entries of a file list kept in stats.json; a longer one goes whole to files.json
FILE_LISTS = ("inputs", "kept_files", "marked_files")
TEXT_GROUP_FILES = 1 << 18  # text files copied whole a group in this process, at most (its lists: ~0.3 KB a file)


def bound_lists(stats: dict, out: Folder, limit: Optional[int] = None) -> dict:
    """stats.json bounded whatever the number of files: a list of :data:`FILE_LISTS` longer than
    ``limit`` is written whole to ``out``'s files.json, and stats.json keeps its first ``limit``
    entries and, under ``lists``, the length of each list moved and the file it is in (a run of
    27,000 files made a 2.9 MB stats.json). files.json's text is made a list at a time
    (:func:`files_json`). Returns ``stats``, changed in place: its lists plain lists."""
    limit = FILE_LIST_LIMIT if limit is None else limit
    long = {k: stats[k] for k in FILE_LISTS
            if isinstance(stats.get(k), (list, InputEntries)) and len(stats[k]) > limit}
    for k in FILE_LISTS:
        if isinstance(stats.get(k), InputEntries) and k not in long:
            stats[k] = list(stats[k])
    if not long:
        return stats
    out.write_bytes(FILES_JSON, files_json(long))
    stats["lists"] = {"file": FILES_JSON, **{k: len(v) for k, v in long.items()}}
    for k in long:
        stats[k] = long[k][:limit]
    return stats


def files_json(lists: Dict[str, Sequence]) -> bytes:
    """files.json: the bytes of ``json_bytes(lists, indent=None)`` (sorted keys, one line), each
    list's text made at once: :meth:`InputEntries.encoded`, a list of names by the C encoder. At
    100,000 files (9.7 MB), 100,000 dicts made (0.03 CPU-s) and dumped with sorted keys (0.08)
    took the main thread 0.11 CPU-s; this ~0.05."""
    def encoded(value: Sequence) -> str:
        return value.encoded() if isinstance(value, InputEntries) else json.dumps(value, sort_keys=True)
    return ("{" + ", ".join(f"{encode_basestring_ascii(k)}: {encoded(lists[k])}" for k in sorted(lists))
            + "}\n").encode()


class InputEntries(abc.Sequence):
    """stats.json's ``inputs`` of a run of more than FILE_LIST_LIMIT files: for each source
    ``{"name", "format", "documents"}`` (and ``"skipped"``: why a file holds no documents), a
    dict made when it is read (stats.json keeps the first FILE_LIST_LIMIT: :func:`bound_lists`),
    and the JSON text of the whole list made from its columns (:meth:`encoded`, for files.json),
    not from 100,000 dicts."""

    def __init__(self, sources: Sequence[nio.Source], per_source: Sequence[int], skipped: Dict[int, str]):
        self._sources, self._documents, self._skipped = sources, per_source, skipped

    def __len__(self) -> int:
        return len(self._sources)

    def __getitem__(self, i):
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(len(self)))]
        i = range(len(self))[i]
        s = self._sources[i]
        entry = {"name": s.name, "format": s.format, "documents": int(self._documents[i])}
        if i in self._skipped:
            entry["skipped"] = self._skipped[i]
        return entry

    def encoded(self) -> str:
        """The text of ``json.dumps(list(self), sort_keys=True)``: each entry's pieces (the
        strings C-encoded) laid in one list and joined, ``"skipped"`` (the last key) put before
        the piece that closes its entry. At 100,000 files ~0.045 CPU-s."""
        n = len(self)
        if n == 0:
            return "[]"
        closes = ['}, {"documents": '] * (n + 1)  # closes[i]: what ends entry i - 1 and opens entry i
        closes[0], closes[n] = '[{"documents": ', "}]"
        for si, reason in self._skipped.items():
            closes[si + 1] = ', "skipped": ' + encode_basestring_ascii(reason) + closes[si + 1]
        formats = [s.format for s in self._sources]
        after = {f: ', "format": ' + encode_basestring_ascii(f) + ', "name": ' for f in set(formats)}
        parts = [""] * (4 * n + 1)
        parts[0::4] = closes
        parts[1::4] = map(str, map(int, self._documents))
        parts[2::4] = map(after.__getitem__, formats)
        parts[3::4] = map(encode_basestring_ascii, [s.name for s in self._sources])
        return "".join(parts)


def full_list(out: Folder, stats: dict, key: str) -> Optional[list]:
    """The whole list ``key`` of a result's stats.json (:func:`bound_lists`): from files.json when
    it was moved there, else as stats.json has it; None when neither has it."""
    moved = stats.get("lists")
    if isinstance(moved, dict) and key in moved:
        whole = out.read_json(FILES_JSON) if out.exists(FILES_JSON) else None
        value = whole.get(key) if isinstance(whole, dict) else None
        return value if isinstance(value, list) else None
    value = stats.get(key)
    return value if isinstance(value, list) else None


def removed_records(members: pa.Table, names: pa.Array) -> pa.Table:
    """Rows of removed.parquet from member rows (MEMBERS_SCHEMA) of removed documents."""
    return pa.table({"id": members.column("id"), "representative": members.column("representative_id"),
                     "cluster": members.column("cluster_id"), "similarity": members.column("similarity"),
                     "source": take_array(names, to_numpy(members.column("source"))), "row": members.column("row"),
                     "representative_source": members.column("representative_source")},
                    schema=REMOVED_SCHEMA)


def cluster_records(members: pa.Table) -> pa.Table:
    """Rows of clusters.parquet from member rows."""
    return pa.table({"id": members.column("id"), "cluster": members.column("cluster_id"),
                     "is_representative": arrow(~to_numpy(members.column("removed")))}, schema=CLUSTERS_SCHEMA)


def rejected_table(records: Sequence[Sequence], names: Sequence[str]) -> pa.Table:
    """rejected.parquet from [source, row or None, reason] rows (sorted here: file, then row)."""
    rows = sorted(records, key=lambda t: (t[0], -1 if t[1] is None else t[1]))
    return pa.table({"source": arrow([names[s] for s, _, _ in rows], pa.string()),
                     "row": arrow([r for _, r, _ in rows], pa.int64()),
                     "reason": arrow([x for _, _, x in rows], pa.string())}, schema=REJECTED_SCHEMA)


def prepare_output(output: Folder, name: str = "kept") -> Folder:
    """Makes the output folder and an empty kept/ (or ``name``: marked/) in it; returns it."""
    output.remove(name)
    kept = output.child(name)
    kept.makedirs()
    return kept


def write_kept_group(sources: Sequence[nio.Source], group: Sequence[int], rows: Dict[int, np.ndarray],
                     dropped: Dict[int, np.ndarray], kept: Folder, config,
                     wanted: Optional[Dict[int, Dict[int, int]]] = None,
                     progress: Optional[Callable[[int], None]] = None,
                     marks: Optional[Dict[int, pa.Table]] = None,
                     lines: Optional[Dict[int, np.ndarray]] = None,
                     stats: Optional[Dict[int, FileStat]] = None,
                     sizes: Optional[Sequence[int]] = None,
                     started: Optional[Callable[[], None]] = None
                     ) -> Tuple[Dict[int, str], Dict[int, str], int, Optional[int]]:
    """Kept files of a group of sources, in the folder ``kept``: for source si, ``rows[si]`` (its
    documents' rows) less ``dropped[si]`` (removed or rejected), written with
    :func:`neardup.io.write_kept`; in-memory tables as Parquet. ``wanted[si]`` = {row: doc} of
    documents whose text the report shows: caught on the way where the file is copied line by
    line. With ``config.mark``, every document but the rejected ones is written, with its marks
    (``marks[si]``: its member rows, :mod:`.mark`), and the count returned is of the kept ones.
    Returns (written relpath per source, captured texts by doc, documents kept, the bytes of the
    files written: what the report says of kept/ without listing it; None with ``config.mark``
    or a kept/ in a store). ``lines[si]``: the lines of its documents where the read stage saw
    them, copied from there when the file is as ``stats[si]`` says the run found it
    (:mod:`.write_lines`). ``sizes``: the size of each file of ``group`` as the run found it
    (:func:`walked_sizes`), which spares the copy of a text file copied whole a call. ``started``:
    called as the kernel starts copying a file's kept lines (:func:`.write_lines.copy_kept_lines`)."""
    written: Dict[int, str] = {}
    n_written = 0
    sized = [] if kept.os_path is not None and not config.mark else None  # files written, not copied
    captured: Dict[int, str] = {}
    copies: List[nio.Source] = []  # text files copied whole, and their relpaths
    copy_rels: List[str] = []
    copy_sizes: List[int] = []
    copied_whole = copies_whole(config)
    for k, si in enumerate(group):
        check_interrupt()
        if progress is not None:
            progress(1)
        src = sources[si]
        if copied_whole and src.format == "text":  # a folder of many text files: no per-file arrays
            all_rows = rows.get(si)
            gone = dropped.get(si)
            if all_rows is None or len(all_rows) == 0 or (gone is not None and len(gone) and (
                    int(all_rows[0]) in gone.tolist() if len(all_rows) == 1  # one document: no np.isin
                    else len(kept_rows(all_rows, gone)) == 0)):
                continue  # nothing could be read from it (all rejected), or a removed text file
            copies.append(src)  # copied whole, many at a time (below)
            copy_rels.append(src.relpath)
            copy_sizes.append(sizes[k] if sizes is not None else -1)
            written[si] = src.relpath
            n_written += 1
            continue
        all_rows = rows.get(si, np.zeros(0, np.int64))
        keep = kept_rows(all_rows, dropped.get(si, np.zeros(0, np.int64)))
        if config.mark:
            rel, _, n = marking.write_marked_source(sources, si, keep, (marks or {}).get(si), kept,
                                            table_kept_name(si, len(sources)))
            if rel is not None:
                written[si] = rel
                n_written += n
            continue
        if src.format == "table":
            name = table_kept_name(si, len(sources))
            table = arrow_take(src.table, keep)
            if INDEX_ID_COLUMN in table.column_names:
                table = table.drop_columns([INDEX_ID_COLUMN])
            kept.write_parquet(name, table)
            if sized is not None:
                sized.append(name)
            written[si] = name
            n_written += len(keep)
            continue
        if len(all_rows) == 0 or (src.format == "text" and len(keep) == 0):
            continue  # nothing could be read from it (all rejected), or a removed text file
        rel = nio.output_relpath(src, config.output_format)
        want = (wanted or {}).get(si, {})
        capture = dict.fromkeys(want) if want and src.format == "jsonl" else None
        bounds = (lines or {}).get(si)
        expected = (stats or {}).get(si)
        n = copy_kept_lines(src, all_rows, bounds, keep, kept.join(rel), expected, capture, started) \
            if copies_lines(src, bounds, expected, config, kept) else None
        if n is None:  # not copied from the bounds (a file changed since): its lines found again
            n = nio.write_kept(src, keep, kept.join(rel), output_format=config.output_format,
                               text_column=config.text_column, id_column=config.id_column, capture=capture)
        n_written += n
        if capture:
            column = text_column_of(src, text_columns(config.text_column))
        for row, line in (capture or {}).items():
            if line is not None:
                captured[want[row]] = json.loads(line)[column]
        if sized is not None:
            sized.append(rel)
        written[si] = rel
    copied = nio.copy_text_files(list(zip(copies, kept_paths(kept, copy_rels))), sizes=copy_sizes)
    nbytes = None if sized is None or copied is None else copied + sum(kept.size(rel) for rel in sized)
    return written, captured, n_written, nbytes


def kept_paths(kept: Folder, rels: Sequence[str]) -> List[str]:
    """``kept.join(rel)`` of each of ``rels``: of a local kept/, without its per-file checks."""
    if kept.os_path is None or os.sep != "/":
        return [kept.join(rel) for rel in rels]
    prefix = kept.path.rstrip("/") + "/"
    return [prefix + rel if rel[:1] != "/" else kept.join(rel) for rel in rels]


def copy_text_group(group: Sequence[int], block_of: Dict[int, List[int]], removed_parts: Sequence[str],
                    rejected: Dict[int, np.ndarray], sizes: Optional[Sequence[int]], *, task, kept: Folder,
                    report=None, started: Optional[Callable[[], None]] = None) -> dict:
    """:func:`write_kept_partition` of a group of text files copied whole (:func:`text_copied_whole`):
    the files that keep their document found in arrays (:func:`text_files_kept`), not a file at a
    time, and copied by :func:`neardup.io.copy_text_files`. The same files and result as
    :func:`write_kept_group`'s (a text file is one document: the documents kept are the files).
    ``started``: called as the copy starts (its threads copy without Python's lock: the write
    stage's thread beside kept/ runs from then on, not after the copy; 100,000 files: its ~0.08 s
    of stitching removed.parquet and clusters.parquet ran after the copy, one core idle)."""
    check_interrupt()
    if report is not None:
        report(len(group))
    places = text_files_kept(task.store, task.work, group, block_of, removed_parts, rejected).tolist()
    sources = task.sources
    files = [sources[group[k]] for k in places]
    written = dict(zip([group[k] for k in places], [src.relpath for src in files]))
    copies = list(zip(files, kept_paths(kept, list(written.values()))))
    sizes = [-1] * len(places) if sizes is None else [sizes[k] for k in places]
    if started is not None:
        started()
    copied = nio.copy_text_files(copies, sizes=sizes)
    nbytes = None if kept.os_path is None or copied is None else copied
    return {"written": written, "captured": {}, "kept": len(written), "files": len(group), "bytes": nbytes}


def text_files_kept(store, work: Folder, group: Sequence[int], block_of: Dict[int, List[int]],
                    removed_parts: Sequence[str], rejected: Dict[int, np.ndarray]) -> np.ndarray:
    """The places in ``group`` of the files that keep a document: one of their blocks' documents
    neither removed (``removed_parts``) nor rejected (:func:`dropped_pairs`), each (source, row)
    one int64 key, found by two ``np.isin``: not a dict of rows and one of dropped rows a file, tested
    one by one (rows_of_sources, rows_by_source and write_kept_group's loop: at 100,000 files the
    main thread's CPU in write_kept_partition, before and around the copy, 0.143 -> 0.093 s)."""
    pieces = [block_source_rows(store, b) for b in sorted(set(chain.from_iterable(block_of.values())))]
    source = np.concatenate([p[0] for p in pieces] + [np.zeros(0, np.int32)]).astype(np.int64)
    row = np.concatenate([p[1] for p in pieces] + [np.zeros(0, np.int64)]).astype(np.int64)
    gone_source, gone_row = dropped_pairs(work, removed_parts, group, rejected)
    width = int(max(row.max(initial=0), gone_row.max(initial=0))) + 1  # (sources x rows far below 2**63)
    alive = ~np.isin(source * width + row, gone_source * width + gone_row)
    return np.flatnonzero(np.isin(np.asarray(group, np.int64), source[alive]))


def fetch_texts(sources: Sequence[nio.Source], config, wanted: Dict[int, Dict[int, int]]) -> Dict[int, str]:
    """The texts of a few documents, {source: {row: doc}}, by reading again only their sources."""
    out: Dict[int, str] = {}
    for si in sorted(wanted):
        want = wanted[si]
        last = max(want)
        for batch in nio.read_source(sources[si], si, text_column=config.text_column, on_error="skip",
                                     batch_size=config.batch_size):
            rows = batch.rows
            for i in np.flatnonzero(np.isin(rows, np.fromiter(want.keys(), np.int64))).tolist():
                out[want[int(rows[i])]] = batch.text[i].as_py()
            if len(rows) and rows[-1] >= last:
                break
    return out


def sample_table(top: List[dict], texts: Dict[int, str]) -> pa.Table:
    """texts_sample.parquet: the members of the largest clusters, as ``top`` lists them."""
    wanted = [m for c in top for m in c["members"]]  # [doc, id, source, row]
    return pa.table({"id": arrow([m[1] for m in wanted], pa.string()),
                     "text": arrow([texts[m[0]] for m in wanted], pa.string())}, schema=SAMPLE_SCHEMA)


def wanted_texts(top: List[dict]) -> Dict[int, Dict[int, int]]:
    out: Dict[int, Dict[int, int]] = {}
    for c in top:
        for doc, _id, si, row in c["members"]:
            out.setdefault(int(si), {})[int(row)] = int(doc)
    return out


def build_stats(cfg, sources: Sequence[nio.Source], counts: dict, per_source, kept_files: List[str],
                skipped: Sequence[Sequence] = ()) -> dict:
    """The content of stats.json (without "seconds"), the same for every engine. Checks first
    that every input document is accounted for: kept, removed or rejected. ``skipped``:
    [source, reason] of the files that hold no documents without an error (``Batch.skipped``);
    each says so in its ``inputs`` entry, and ``files`` counts them with what discovery did with
    symbolic links."""
    if counts["input"] != counts["kept"] + counts["removed"] + counts["rejected"]:
        raise RuntimeError(f"internal error: counts do not add up: {counts}; please report this bug")
    why = {int(si): reason for si, reason in skipped}
    inputs = InputEntries(sources, per_source, why)  # a long list's dicts made for stats.json's first entries only
    return {
        "counts": counts,
        "files": file_counts(sources, why.values()),
        "params": cfg.recorded(),
        "inputs": inputs if len(inputs) > FILE_LIST_LIMIT else list(inputs),
        "kept_files": kept_files,
        "neardup_version": __version__,
    }


def file_counts(sources: Sequence[nio.Source], skipped_reasons) -> dict:
    """stats.json's ``files``: input files (in-memory tables not counted), those skipped by kind
    (:data:`neardup.io.batch.SKIP_KINDS`: empty, binary / not UTF-8, compressed and unreadable,
    walked ``.json`` files of no JSON Lines records, walked data files without the text field),
    and the symbolic links discovery read once or did not follow, and the further paths of
    hard-linked files it left out (:class:`neardup.io.sources.Sources`)."""
    reasons = list(skipped_reasons)
    links = getattr(sources, "links", {})
    out = {"inputs": sum(1 for s in sources if s.format != "table")}
    for start, key, _ in SKIP_KINDS:
        out[key] = out.get(key, 0) + sum(1 for r in reasons if r.startswith(start))
    return {**out,
            "links_read_once": int(links.get("read_once", 0)),
            "links_not_followed": int(links.get("not_followed", 0)),
            "hard_links_read_once": int(links.get("hard_links", 0))}


def run_counts(n_docs: int, read, pairs, clusters, kept: int) -> dict:
    """The counts of stats.json from the stages' records (:mod:`.records`) and the documents the
    kept files got."""
    return {
        "input": int(n_docs + read.rejected_records),
        "kept": int(kept),
        "removed": int(clusters.removed),
        "removed_against_index": int(clusters.removed_against_index),
        "rejected": int(read.rejected_records + len(read.rejected_documents)),
        "clusters": int(clusters.clusters),
        "empty_documents": int(read.empty_kept),
        "candidate_pairs": int(pairs.candidate_pairs),
        "verified_pairs": int(pairs.verified_pairs),
        "buckets": int(pairs.buckets),
        "truncated_buckets": int(pairs.truncated_buckets),
    }


# --------------------------------------------------------------------------- the stage


class WriteStage:
    """removed.parquet and clusters.parquet from the members, sorted and written by the
    engine's calls (:func:`write_members`: the driver sees counts and names, never a member
    row); kept/ a group of input files a call, each learning its removed rows from the sorted
    parts; in-memory tables here, where they are; then rejected.parquet, texts_sample.parquet
    and the stats (returned: stats.json is the run's to write, last). clusters.parquet's ranges
    and the stitching of both member files run in a thread while kept/ is written: on the local
    engine the kernel copying kept lines and the stitching keep two cores busy at once; on Ray
    the driver waits for both steps' tasks at once, and the cluster runs them side by side
    (each file group's kept task and the stitching tasks), not one step after the other. The
    same bytes; an error there is raised once kept/ is done."""
    name = "write"

    def run(self, run, engine) -> dict:
        run.work.remove_fingerprints_later()  # read by no step from here on (a disposable work dir)
        out = run.output
        out.makedirs()
        later: List[Callable[[], None]] = []
        parts_of = write_members(run, engine, later)
        check_interrupt()
        # clusters.parquet and removed.parquet written (locally) or awaited (Ray) by a thread
        # while this one writes or awaits kept/: the same files; numba's threads set where the
        # thread runs kernels (a Ray driver's awaits tasks, and imports no numba for it)
        threads = engine.workers if engine.in_process else None
        # in this process the thread starts its work once the kernel copies kept lines (or kept/
        # is done): before, its Python would hold the lock that the steps to the copy need
        gate = _Gate() if later and engine.in_process else None
        beside = (later[0] if run.after_members is None else partial(_then, later[0], run.after_members)) if later else None
        background = Background(beside if gate is None else partial(gate.then, beside), "neardup-members",
                                threads=threads) if later else None
        try:
            kept_files, kept, captured, nbytes = self._write_kept(run, engine, parts_of,
                                                                  None if gate is None else gate.open)
        except BaseException:
            if gate is not None:
                gate.close()  # nothing more to do there
            raise
        finally:
            if gate is not None:
                gate.open()
            if background is not None:
                background.wait()  # nothing written after an error here
        if background is not None:
            background.join()
        run.kept_tally = None if nbytes is None else KeptTally(len(kept_files), nbytes)
        return finish_write(run, kept_files, kept, captured)

    def _write_kept(self, run, engine, parts_of, started: Optional[Callable[[], None]] = None):
        """kept/ (or marked/): (its files, the documents kept, the texts caught for the report,
        the bytes of its files or None: :func:`write_kept_group`). ``parts_of``: blocks -> the
        parts that hold their removed (or marks) rows (:func:`write_members`). ``started``: as for
        :func:`write_kept_group` (in this process only)."""
        out = run.output
        rejected = _rejected_by_source(run)
        mark = run.config.mark
        kept_folder = prepare_output(out, "marked" if mark else "kept")
        wanted = wanted_texts(run.info("clusters").top)
        plan = run.work.plan(run.sources)
        block_of = blocks_of_sources(plan)
        files = [si for si, s in enumerate(run.sources) if s.format != "table"]
        whole_text = text_copied_whole(run.sources, files, run.config)
        # text files copied whole: one group in this process (the copy's pool of threads is its
        # parallelism) of at most TEXT_GROUP_FILES, one a core on Ray; other files four a core
        # (see text_copied_whole)
        calls = max(1, math.ceil(len(files) / TEXT_GROUP_FILES)) if whole_text and engine.in_process \
            else (1 if whole_text else 4) * engine.cpus
        size = max(1, math.ceil(len(files) / calls))
        groups = [files[i:i + size] for i in range(0, len(files), size)]
        items = []
        # a group's entries made by C loops, or from the few rejected and wanted sources (100,000
        # files: ~0.016 -> ~0.011 CPU-s)
        for g in groups:
            blocks = dict(zip(g, map(block_of.__getitem__, g)))
            items.append((g, blocks, parts_of(set(chain.from_iterable(blocks.values()))), _of_group(rejected, g),
                          {} if mark else _of_group(wanted, g),
                          # (the JSONL files' stats: none among text files only, not looked for a file a call)
                          {} if whole_text or not copies_whole(run.config)
                          else expected_stats(run.work.inputs, run.sources, g),
                          walked_sizes(run.work.inputs, g) if copies_whole(run.config) else None))
        written: Dict[int, str] = {}
        captured: Dict[int, str] = {}
        kept = 0
        nbytes: Optional[int] = 0
        with bar("write kept", total=len(files), unit="input file", quiet=run.quiet) as progress:
            task = run.task(engine)
            call = partial(write_kept_partition, task=task, kept=kept_folder, whole_text=whole_text)
            if started is not None:
                call = partial(call, started=started)
            for r in engine.collect(engine.map(call,
                                               items, progress=progress, units=lambda r: r["files"])):
                written.update(r["written"])
                captured.update(r["captured"])
                kept += r["kept"]
                nbytes = _added(nbytes, r["bytes"])
            progress.set_postfix_str(f"{len(written):,} {plural(len(written), 'file')} written")
        tables = [si for si, s in enumerate(run.sources) if s.format == "table"]
        if tables:  # the removed rows of these tables' blocks only, read here where the tables are
            parts = parts_of({b for si in tables for b in block_of[si]})
            dropped, marks = dropped_or_marks(run.work.folder, parts, tables, rejected, mark)
            t_written, _, t_kept, t_bytes = write_kept_group(
                run.sources, tables, rows_of_sources(run.store, {si: block_of[si] for si in tables}), dropped,
                kept_folder, run.config, marks=marks)
            written.update(t_written)
            kept += t_kept
            nbytes = _added(nbytes, t_bytes)
        return [written[si] for si in sorted(written)], kept, captured, nbytes


def blocks_of_sources(plan: Sequence[Sequence[int]]) -> Dict[int, List[int]]:
    """Source -> the blocks of the read plan it lies in, in order (a split file's rows lie in
    several blocks), each list read only: where every source lies in one block (no split file),
    the sources of a block share one list ``[b]``, added a block at a time (100,000 files in 15
    blocks, alone: 0.021 -> 0.004 CPU-s, not a list and a call a file, on the write stage's one
    core before the copy)."""
    block_of: Dict[int, List[int]] = {}
    for b, members in enumerate(plan):
        block_of.update(zip(members, repeat([b])))
    if len(block_of) == sum(map(len, plan)):
        return block_of
    block_of = {}
    for b, members in enumerate(plan):
        for si in members:
            block_of.setdefault(si, []).append(b)
    return block_of


def _of_group(found: Dict[int, Any], group: Sequence[int]) -> Dict[int, Any]:
    """The entries of ``found`` (by source) of the sources of ``group`` (ascending), in its order."""
    if len(found) >= len(group):
        return {si: found[si] for si in group if si in found}
    return {si: found[si] for si in sorted(found) if (i := bisect_left(group, si)) < len(group) and group[i] == si}


def _then(first: Callable[[], None], second: Callable[[], None]) -> None:
    first()
    second()


class _Gate:
    """What the write stage's thread does beside kept/ (:meth:`then`), held until :meth:`open`
    (the first copy of kept lines starts, or kept/ is done), not done after :meth:`close` (kept/
    failed)."""

    def __init__(self):
        self._event = threading.Event()
        self._closed = False

    def open(self) -> None:
        self._event.set()

    def close(self) -> None:
        self._closed = True
        self._event.set()

    def then(self, fn: Callable[[], None]) -> None:
        self._event.wait()
        if not self._closed:
            fn()


def text_copied_whole(sources: Sequence[nio.Source], files: Sequence[int], config) -> bool:
    """Whether every input file is a text file that kept/ gets whole (a folder of many small
    text files): their groups are one a core, not four (each file the same work: nothing to
    balance), so that fewer pools of copy threads start (a thread start waits for a core: at
    100,000 files, 82 starts held the stage ~0.2 s, 34 ~0.1 s; the stage 0.82 -> 0.79 s, load 1.3);
    in this process one group in all (one pool of copy threads: at 100,000 files, between two
    groups' copies ~0.05-0.07 s of the next group's list on one core, and a second pool's start
    and end)."""
    return copies_whole(config) and all(sources[si].format == "text" for si in files)


def walked_sizes(inputs: Optional[Sequence], group: Sequence[int]) -> Optional[List[int]]:
    """The size of each file of ``group`` as the run's identity recorded it (``WorkDir.inputs``:
    [name, path, size, mtime] each; -1 for an in-memory table's), for the copy of the text files
    copied whole to kept/; None where the run has no identity."""
    if inputs is None:
        return None
    return recorded_sizes(inputs, group)


def _added(total: Optional[int], more: Optional[int]) -> Optional[int]:
    """A sum of byte counts, None once one of them is (not known)."""
    return None if total is None or more is None else total + more


def write_kept_partition(item, *, task, kept: Folder, report=None, started: Optional[Callable[[], None]] = None,
                         whole_text: bool = False) -> dict:
    """One group of input files: (sources, the block of each, the parts that hold their blocks'
    removed documents (:func:`dropped_rows`), their rejected rows, the rows whose text the
    report shows, the size and modification time of the JSONL files whose lines the read stage
    saw (:func:`expected_stats`), to which :func:`read_stats` adds what it saw of them, and the
    size of each of its files as the run found it (:func:`walked_sizes`) -> their kept files.
    ``started``: as for :func:`write_kept_group` (or :func:`copy_text_group`). ``whole_text``:
    every input file is a text file copied whole (:func:`text_copied_whole`): :func:`copy_text_group`."""
    group, block_of, removed_parts, rejected, wanted, stats, sizes = item
    if whole_text:
        return copy_text_group(group, block_of, removed_parts, rejected, sizes, task=task, kept=kept, report=report,
                               started=started)
    dropped, marks = dropped_or_marks(task.work, removed_parts, group, rejected, task.config.mark)
    lines: Dict[int, np.ndarray] = {}
    rows = rows_of_sources(task.store, block_of, lines if stats else None)
    stats = read_stats(task.work, block_of, stats) if stats else stats
    written, captured, n, nbytes = write_kept_group(task.sources, group, rows, dropped, kept, task.config, wanted,
                                                    progress=report, marks=marks, lines=lines, stats=stats,
                                                    sizes=sizes, started=started)
    return {"written": written, "captured": captured, "kept": n, "files": len(group), "bytes": nbytes}


def dropped_or_marks(work: Folder, parts: Sequence[str], group: Sequence[int], rejected: Dict[int, np.ndarray],
                     mark: bool) -> Tuple[Dict[int, np.ndarray], Optional[Dict[int, pa.Table]]]:
    """What each source of ``group`` loses, and (``--mark``) its member rows: without ``mark``
    its removed and rejected rows (``parts``: removed parts), with it only its rejected rows and
    the member rows of ``parts`` (marks parts), which say how to mark the others."""
    if not mark:
        return dropped_rows(work, parts, group, rejected), None
    return dropped_rows(work, [], group, rejected), marking.member_marks(work, parts, group)


def rows_of_sources(store, block_of: Dict[int, List[int]], lines: Optional[Dict[int, np.ndarray]] = None
                    ) -> Dict[int, np.ndarray]:
    """The rows of the documents of each source (it lies in the blocks ``block_of[si]``: one,
    or the ranges of a split file, in file order), in file order. ``lines``, when given, gets
    the bounds of those documents' lines (:func:`.write_lines.block_lines`) for each source
    whose blocks all have them. A block's sources and rows come from its summary's runs where
    it has them (:meth:`.corpus.DocStore.source_rows_of`: at 1M documents, 36 blocks' columns
    not opened and read before the kept lines' copy can start), else from its file."""
    out: Dict[int, np.ndarray] = {}
    by_block: Dict[int, List[int]] = {}
    for si, bs in block_of.items():
        for b in bs:
            by_block.setdefault(b, []).append(si)
    parts: Dict[int, list] = {}  # si -> [(block, rows, lines or None)]
    for b, group in by_block.items():
        source, row = block_source_rows(store, b)
        known = None if lines is None else block_lines(store.work, b)
        if bool(np.any(source[1:] < source[:-1])):  # else each source's rows a slice as they are, no copy
            sel = np.isin(source, np.array(group, source.dtype))
            order = np.flatnonzero(sel)[np.argsort(source[sel], kind="stable")]
            source, row = source[order], row[order]
            known = None if known is None else known[order]
        firsts = np.searchsorted(source, np.array(group, source.dtype), side="left")
        ends = np.searchsorted(source, np.array(group, source.dtype), side="right")
        for si, lo, hi in zip(group, firsts.tolist(), ends.tolist()):
            if len(block_of[si]) == 1:  # the file in one block (a folder of many files: each)
                out[si] = row[lo:hi]
                if known is not None:
                    lines[si] = known[lo:hi]
            else:
                parts.setdefault(si, []).append((b, row[lo:hi], None if known is None else known[lo:hi]))
    for si, pieces in parts.items():
        pieces.sort(key=lambda p: p[0])  # the ranges of a split file, in file order
        out[si] = pieces[0][1] if len(pieces) == 1 else np.concatenate([p[1] for p in pieces])
        if lines is not None and all(p[2] is not None for p in pieces):
            lines[si] = pieces[0][2] if len(pieces) == 1 else np.concatenate([p[2] for p in pieces])
    return out


def block_source_rows(store, b: int) -> Tuple[np.ndarray, np.ndarray]:
    """The source and row of each document of block ``b``: from its summary's runs where it has
    them (:meth:`.corpus.DocStore.source_rows_of`), else from its file."""
    found = store.source_rows_of(b, np.arange(store.block_start[b + 1] - store.block_start[b]))
    if found is None:
        t = store.table(b, ["source", "row"])
        found = to_numpy(t.column("source").combine_chunks()), to_numpy(t.column("row").combine_chunks())
    return found


# --------------------------------------------------------------------------- the members, by range

MEMBER_BYTES = 200  # about what a member row weighs in the write stage's shuffles (ids included)
CLUSTER_COLUMNS = ["doc", "cluster", "id", "cluster_id", "removed"]


def write_members(run, engine, later: Optional[List[Callable[[], None]]] = None
                  ) -> Callable[[Set[int]], List[str]]:
    """removed.parquet and clusters.parquet without a member row in the driver. The members
    (``clusters/part-*.arrow``) are range-partitioned on a key known in advance, the document
    (removed rows) or the cluster's head document (every member; -1, an index's match, in the
    first range): ranges of ``width`` documents, as many as the engine wants partitions. Each
    range is sorted by a call and written to the work dir (:func:`write_ranges`); a call then
    stitches each file from its ranges in order (:func:`stitch_output`: streamed, the bytes of
    one sorted table written at once). Returns what the kept/ writers need to find their
    removed rows: blocks -> the sorted parts that may hold them (:func:`removed_parts_of`).
    With ``--mark`` every member is written by document too (kind ``marks``: :mod:`.mark`),
    and the parts returned are those.

    ``later``: a list to which the work the kept/ writers do not need (clusters.parquet's
    ranges, the stitching of both files) is appended as one function, not done here: the
    caller runs it while kept/ is written (:class:`WriteStage`); the files are the same. When
    every removed row falls in one range (and without ``--mark``), the removed range is sorted
    there too, and the parts returned are the members parts: the kept/ writers read their removed
    rows from them (the copy of kept lines starts without waiting for that sort:
    at 1M documents, ~0.17 CPU-s of reading, filtering, sorting and writing 107,000 member rows
    moved beside it)."""
    run.work.stage_dir("write", fresh=True)
    info = run.info("clusters")
    parts = run.work.parts("clusters")
    nbytes = (info.members + info.removed_against_index) * MEMBER_BYTES
    n_ranges = 1 if engine.one_call(nbytes) else max(1, engine.partitions(nbytes))
    width = max(1, math.ceil(run.corpus.n / n_ranges))
    work = run.work.folder
    ranges: Dict[str, List[int]] = {"marks": []}

    def sort_ranges(kind: str, beside: bool = False) -> None:
        done: Dict[int, int] = {}
        if parts:
            rows = engine.map(partial(member_rows, work=work, kind=kind, width=width), parts, beside=beside)
            for found in engine.collect(engine.map(partial(write_ranges, work=work, kind=kind),
                                                   engine.shuffle(rows, "range", n_ranges), beside=beside)):
                done.update(found)
        ranges[kind] = sorted(done)

    def clusters_and_stitch(beside: bool = False) -> None:
        sort_ranges("clusters", beside)
        jobs = [(kind, [range_name(kind, r) for r in ranges[kind]]) for kind in ("removed", "clusters")]
        engine.collect(engine.map(partial(stitch_output, task=run.task(engine, with_store=False), out=run.output),
                                  jobs, beside=beside))

    # what goes to ``later`` runs beside the kept/ calls: its calls wait for none of their CPUs
    if later is not None and n_ranges == 1 and not run.config.mark:
        later.append(lambda: (sort_ranges("removed", True), clusters_and_stitch(True)))
        return lambda _blocks: parts
    for kind in ("removed",) + (("marks",) if run.config.mark else ()):
        sort_ranges(kind)
    if later is None:
        clusters_and_stitch()
    else:
        later.append(partial(clusters_and_stitch, True))
    kind = "marks" if run.config.mark else "removed"
    return partial(removed_parts_of, block_start=run.corpus.block_start, width=width, ranges=ranges[kind], kind=kind)


def member_rows(name: str, *, work: Folder, kind: str, width: int) -> pa.Table:
    """One members part -> the rows of ``kind`` with their range (column ``range``): the removed
    members (every column) by document, or every member (what clusters.parquet needs) by cluster."""
    t = work.read_table(name)
    if kind in ("removed", "marks"):
        t = take_rows(t, np.flatnonzero(to_numpy(t.column("removed")) if kind == "removed" else column(t, "doc") >= 0))
        key = column(t, "doc")
    else:
        t = t.select(CLUSTER_COLUMNS)
        key = column(t, "cluster")
    return t.append_column("range", arrow(np.maximum(key, 0) // width))


def write_ranges(table: pa.Table, *, work: Folder, kind: str) -> Dict[int, int]:
    """One partition of the shuffle on the range: each of its ranges sorted (removed: by
    document; clusters: by cluster, then document) and written (:func:`range_name`; clusters as
    CLUSTERS_SCHEMA rows). Returns {range: rows}."""
    if table.num_rows == 0:
        return {}
    key = column(table, "range")
    table = table.drop_columns([c for c in ("range", "part") if c in table.column_names])
    out: Dict[int, int] = {}
    for r in unique(key).tolist():  # (np.unique imports numpy.ma)
        t = take_rows(table, np.flatnonzero(key == r))
        # sorted in numpy (stable, as Arrow's sort_by: which imports pyarrow.compute, issue 32)
        if kind in ("removed", "marks"):
            t = t.select(MEMBERS_SCHEMA.names)
            t = take_rows(t if t.schema == MEMBERS_SCHEMA else t.cast(MEMBERS_SCHEMA),
                          np.argsort(column(t, "doc"), kind="stable"))
        else:
            t = cluster_records(take_rows(t, np.lexsort((column(t, "doc"), column(t, "cluster")))))
        work.write_arrow(range_name(kind, r), t)
        out[int(r)] = t.num_rows
    return out


def stitch_output(job, *, task, out: Folder) -> int:
    """removed.parquet or clusters.parquet (``job``: the kind and its sorted parts, in range
    order) stitched from the parts, row group by row group. Returns the rows."""
    kind, names = job
    if kind == "removed":
        src = arrow([s.name for s in task.sources], pa.string())
        return out.stitch_parquet("removed.parquet", REMOVED_SCHEMA, task.work, names,
                                  partial(removed_records, names=src))
    return out.stitch_parquet("clusters.parquet", CLUSTERS_SCHEMA, task.work, names)


def removed_parts_of(blocks, block_start: np.ndarray, width: int, ranges: Sequence[int],
                     kind: str = "removed") -> List[str]:
    """The sorted removed parts that may hold documents of ``blocks`` (their documents are
    ``block_start[b]`` .. ``block_start[b + 1] - 1``), of those that exist (``ranges``)."""
    lo, hi = int(block_start[min(blocks)]), int(block_start[max(blocks) + 1])
    if hi <= lo:
        return []
    first, last = lo // width, (hi - 1) // width
    return [range_name(kind, r) for r in ranges if first <= r <= last]


def dropped_rows(work: Folder, removed_parts: Sequence[str], group: Sequence[int],
                 rejected: Dict[int, np.ndarray]) -> Dict[int, np.ndarray]:
    """What each source of ``group`` loses (source -> rows): its removed documents, read from
    ``removed_parts`` (member rows: the sorted removed parts, or the members parts, whose rows
    not removed are left out; source, row and removed only), and its ``rejected`` rows."""
    return rows_by_source(*dropped_pairs(work, removed_parts, group, rejected))


def dropped_pairs(work: Folder, removed_parts: Sequence[str], group: Sequence[int],
                  rejected: Dict[int, np.ndarray]) -> Tuple[np.ndarray, np.ndarray]:
    """:func:`dropped_rows` as (source, row) int64 arrays."""
    tables = [work.read_table(name, ["source", "row", "removed"]) for name in removed_parts]
    source = np.concatenate([column(t, "source") for t in tables] + [np.zeros(0, np.int64)])
    row = np.concatenate([column(t, "row") for t in tables] + [np.zeros(0, np.int64)])
    removed = np.concatenate([column(t, "removed", bool) for t in tables] + [np.zeros(0, bool)])
    sel = removed & np.isin(source, np.asarray(group, np.int64))
    source, row = source[sel], row[sel]
    if rejected:
        source = np.concatenate([source] + [np.full(len(r), si, np.int64) for si, r in rejected.items()])
        row = np.concatenate([row] + [np.asarray(r, np.int64) for r in rejected.values()])
    return source, row


def rows_by_source(source: np.ndarray, row: np.ndarray) -> Dict[int, np.ndarray]:
    """(source, row) pairs as source -> its rows."""
    order = np.argsort(source, kind="stable")
    source, row = source[order], row[order]
    heads = np.flatnonzero(np.concatenate(([True], source[1:] != source[:-1]))) if len(source) else np.zeros(0, int)
    return {int(source[h]): row[h:e] for h, e in zip(heads.tolist(), np.append(heads[1:], len(source)).tolist())}


def _rejected_by_source(run) -> Dict[int, np.ndarray]:
    """The rows of the documents rejected after reading (duplicate ids: the read stage's record
    lists them), source -> rows."""
    rejected = run.info("read").rejected_docs()
    if not len(rejected):
        return {}
    cols = run.store.columns(rejected, ["source", "row"])
    return rows_by_source(cols["source"].astype(np.int64), cols["row"].astype(np.int64))


def rejected_rows(run) -> List[list]:
    """[source, row, reason] of every rejection: records that could not be read, and documents
    rejected after reading (duplicate ids)."""
    rows = list(run.corpus.rejected_records())
    read = run.info("read")
    if read.rejected_documents:
        cols = run.store.columns(read.rejected_docs(), ["source", "row"])
        for (_doc, reason), s, r in zip(read.rejected_documents, cols["source"].tolist(), cols["row"].tolist()):
            rows.append([int(s), int(r), reason])
    return rows


def finish_write(run, kept_files: List[str], kept: int, texts: Dict[int, str]) -> dict:
    """Once kept/ (``kept`` documents written), removed.parquet and clusters.parquet are written:
    rejected.parquet, texts_sample.parquet, and the stats, which must add up (kept + removed +
    rejected = input) before stats.json is written."""
    cfg = run.config
    read, pairs, clusters = run.info("read"), run.info("pairs"), run.info("clusters")
    out = run.output
    if cfg.on_error == "skip":
        out.write_parquet("rejected.parquet", rejected_table(rejected_rows(run), [s.name for s in run.sources]))
    else:
        out.remove("rejected.parquet")
    missing = {si: {r: d for r, d in rows.items() if d not in texts} for si, rows in wanted_texts(clusters.top).items()}
    texts = dict(texts)
    texts.update(fetch_texts(run.sources, cfg, {si: w for si, w in missing.items() if w}))
    if clusters.top:
        out.write_parquet("texts_sample.parquet", sample_table(clusters.top, texts))
    else:
        out.parquet_rows("texts_sample.parquet", SAMPLE_SCHEMA).close()
    counts = run_counts(run.corpus.n, read, pairs, clusters, kept)
    run.stats = build_stats(cfg, run.sources, counts, read.per_source, [] if cfg.mark else kept_files,
                            read.skipped_files)
    if cfg.mark:  # the files of marked/ (kept/ has none): what a later run may replace
        run.stats["marked_files"] = kept_files
    if cfg.against:
        from .against import index_stats
        run.stats["indexes"] = index_stats(cfg, run.corpus.summaries)
    return bound_lists(run.stats, out)
