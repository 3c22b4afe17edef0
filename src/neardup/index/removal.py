"""Removing documents from an index (a takedown, an expiring dump): tombstones.

A removal never changes a segment. For each segment that holds a removed document it writes a
tombstone: one immutable object (``dead.u32``, stored like a segment's files under a name of its
own) with the positions of every removed document of the segment, sorted and unique, those
removed before included. The manifest entry of the segment names its tombstone::

    entry["dead"] = {"name": NAME, "docs": count, "source_docs": [count per source], "files": {...}}

so the manifest switch that names the new tombstones makes the removal visible to every reader
at once, and a removal killed before it leaves the index as it was (the written tombstones are
orphans, removed by the next writer). A reader drops the candidates that a tombstone names
before it verifies any; compaction rewrites the segments without their removed documents and
the tombstones go with the old segments.

Removals race with other writers as adds do: a folder index takes the writers' lock; on Redis
the manifest switch is a WATCHed transaction, and a removal whose segments changed meanwhile (an
other removal, a compaction) reads the index again and starts over.
"""

from __future__ import annotations

import contextlib
import time
from codecs import BOM_UTF8
from typing import Callable, Dict, Iterable, List, Optional, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..errors import ConfigError, InputError, StorageError
from ..io.columns import id_values
from ..progress import check_interrupt, commit_point
from .manifest import check_manifest
from .segments import new_segment_name

DEAD_FILE = "dead.u32"
ATTEMPTS = 20  # removals started over after another writer changed the same segments meanwhile


class _Changed(Exception):
    """The segments a removal resolved were changed by another writer before its switch."""


def dead_name(entry: dict) -> Optional[str]:
    dead = entry.get("dead")
    return dead["name"] if dead else None


def live_docs(entry: dict) -> int:
    return int(entry["docs"]) - (int(entry["dead"]["docs"]) if entry.get("dead") else 0)


def object_names(manifest: Optional[dict]) -> set:
    """Every stored object a manifest names: its segments and their tombstones."""
    out = set()
    for s in (manifest or {}).get("segments", []):
        out.add(s["name"])
        if s.get("dead"):
            out.add(s["dead"]["name"])
    return out


def dead_positions(storage, entry: dict) -> np.ndarray:
    """The positions of the removed documents of a segment (sorted, unique uint32; none: empty)."""
    dead = entry.get("dead")
    if not dead:
        return np.zeros(0, np.uint32)
    return np.asarray(storage.open_segment(dead).array(DEAD_FILE))


def dead_mask(storage, entry: dict) -> Optional[np.ndarray]:
    """True for each removed document of a segment; None when it has none."""
    if not entry.get("dead"):
        return None
    mask = np.zeros(int(entry["docs"]), dtype=bool)
    pos = dead_positions(storage, entry)
    if len(pos) and int(pos[-1]) >= len(mask):
        raise StorageError(f"corrupt tombstone {entry['dead']['name']} of segment {entry['name']}: "
                           f"document {int(pos[-1])} of {len(mask)}")
    mask[pos] = True
    return mask


def dead_problems(entry: dict, dead: np.ndarray) -> List[str]:
    """What contradicts a tombstone whose file matches its checksum (for :meth:`Index.verify`)."""
    info = entry["dead"]
    where = f"segment {entry['name']} tombstone {info['name']} file {DEAD_FILE}"
    if len(dead) != info.get("docs"):
        return [f"{where}: {len(dead)} documents, the manifest says {info.get('docs')}"]
    if len(dead) and (bool(np.any(dead[1:] <= dead[:-1])) or int(dead[-1]) >= entry["docs"]):
        return [f"{where}: not ascending positions below {entry['docs']}"]
    return []


def read_ids_file(path: str) -> List[str]:
    """The ids of ``neardup index remove --ids FILE``: one a line, UTF-8 (a line's end, \\n or
    \\r\\n, is no part of its id, nor a byte-order mark at its start); blank lines are skipped."""
    try:
        with open(path, "rb") as f:
            raw = f.read()
    except OSError as exc:
        raise InputError(f"cannot read --ids {path}: {exc.strerror or exc}") from None
    if raw.startswith(BOM_UTF8):  # a byte-order mark (Notepad's UTF-8) is no part of the first id
        raw = raw[len(BOM_UTF8):]
    out = []
    for no, line in enumerate(raw.split(b"\n"), 1):
        if line.endswith(b"\r"):
            line = line[:-1]
        if not line:
            continue
        try:
            out.append(line.decode("utf-8"))
        except UnicodeDecodeError:
            raise InputError(f"{path}:{no}: not UTF-8 text (the ids file holds one id a line)") from None
    return out


def source_matches(given: str, name: str) -> bool:
    """A source name given to a removal names a source of the index: the same name, or, when
    it ends with "/" (a folder of input files), every source whose name starts with it."""
    return name == given or (given.endswith("/") and name.startswith(given))


def _current(index) -> dict:
    """The index's manifest, as a writer (holding the writers' lock) reads it before a removal:
    checked, its files' sizes checked, what a killed writer left removed."""
    storage = index.storage
    manifest = storage.read_manifest()
    if manifest is None:
        raise StorageError(f"no index at {index.display}")
    check_manifest(index.display, manifest, index.config)
    index.check_files(manifest)
    storage.drop_orphans(manifest)
    return manifest


def _all_found(index, manifest: dict, sources: Sequence[str], found) -> None:
    """Refuses a removal that names a source no segment has (nothing is removed)."""
    missing = [s for s in sources if s not in found]
    if missing:
        known = sorted({s for e in manifest["segments"] for s in e["sources"]})
        shown = ", ".join(repr(s) for s in known[:5]) + (f" and {len(known) - 5} more" if len(known) > 5 else "")
        raise ConfigError(f"index {index.display} has no source {missing[0]!r} (its sources: {shown or 'none'}); "
                          f"nothing was removed")


def ids_of(reader, n: int) -> pa.Array:
    idoff = np.ascontiguousarray(reader.array("idoff.i64"))
    raw = np.ascontiguousarray(reader.array("id.bin"))
    return pa.LargeStringArray.from_buffers(n, pa.py_buffer(idoff), pa.py_buffer(raw))


def _resolve(index, manifest: dict, ids: Optional[pa.Array], sources: Sequence[str]):
    """({segment name: positions of its documents to remove now (not removed before)}, how many
    of the ids name a document of the index, removed before or now); refuses a source name no
    segment has."""
    storage = index.storage
    found_sources = set()
    found_ids: List[pa.Array] = []
    out: Dict[str, np.ndarray] = {}
    for entry in manifest["segments"]:
        check_interrupt()  # a segment at a time: a signal stops the removal here, nothing removed
        n = int(entry["docs"])
        hit = np.zeros(n, dtype=bool)
        wanted = []
        for i, name in enumerate(entry["sources"]):
            named = [s for s in sources if source_matches(s, name)]
            if named:
                wanted.append(i)
                found_sources.update(named)
        reader = storage.open_segment(entry) if (wanted or ids is not None) and n else None
        if wanted and n:
            hit |= np.isin(np.asarray(reader.array("src.u32")), np.asarray(wanted, np.uint32))
        if ids is not None and len(ids) and n:
            seg_ids = ids_of(reader, n)
            named = np.asarray(pc.is_in(seg_ids, value_set=ids).to_numpy(zero_copy_only=False), bool)
            found_ids.append(seg_ids.filter(pa.array(named)))
            hit |= named
        mask = dead_mask(storage, entry)
        if mask is not None:
            hit &= ~mask
        if hit.any():
            out[entry["name"]] = np.flatnonzero(hit).astype(np.uint32)
    _all_found(index, manifest, sources, found_sources)
    found = len(pc.unique(pa.concat_arrays(found_ids))) if found_ids else 0
    return out, found


def remove(index, ids: Optional[Iterable[str]] = None, source=None) -> dict:
    """See :meth:`neardup.Index.remove`."""
    if isinstance(source, str):
        sources = [source]
    else:
        sources = list(source or [])
    if ids is not None and isinstance(ids, str):
        raise ConfigError("ids takes a list of ids; for one id use [id]")
    if index.store == "bloom":
        if ids is not None:
            raise ConfigError(f"index {index.display} is a bloom index: its filters keep no ids, so no document can "
                              f"be removed by id (a whole source can: --source NAME); rebuild it ('neardup index "
                              f"add') from the documents to keep")
        if not sources:
            raise ConfigError("nothing to remove: give a source name (--source NAME)")
        return _remove_bloom_segments(index, sources)
    id_arr = None
    if ids is not None:
        id_arr = ids if isinstance(ids, (pa.Array, pa.ChunkedArray)) else list(ids)
        if isinstance(id_arr, pa.ChunkedArray):
            id_arr = id_arr.combine_chunks()
        id_arr = pc.unique(id_values(id_arr, "id to remove").cast(pa.large_string()))  # as ids are added
    if id_arr is None and not sources:
        raise ConfigError("nothing to remove: give ids (--ids FILE) or a source name (--source NAME)")
    t0 = time.perf_counter()
    storage = index.storage

    def attempt(manifest: dict) -> dict:
        todo, found = _resolve(index, manifest, id_arr, sources)
        written = _write_tombstones(storage, manifest, todo)
        try:
            commit_point()  # a signal before it: nothing removed (the tombstones go); after it: none stops it
            if written:
                storage.commit(_switch(index, manifest, written))
        except _Changed:
            storage.drop_segments([d["name"] for d in written.values()])
            raise
        except BaseException:  # a tombstone the manifest names already stays (a switch that failed after)
            with contextlib.suppress(Exception):
                named = object_names(storage.read_manifest())
                storage.drop_segments([d["name"] for d in written.values() if d["name"] not in named])
            raise
        replaced = [dead_name(e) for e in manifest["segments"] if e["name"] in written and dead_name(e)]
        storage.drop_segments(replaced)
        return {"removed": int(sum(len(p) for p in todo.values())),
                "ids_given": 0 if id_arr is None else len(id_arr),
                "ids_found": found,
                "segments": len(written)}

    return dict(_retried(index, attempt), seconds=round(time.perf_counter() - t0, 3))


def _retried(index, attempt: Callable[[dict], dict]) -> dict:
    """``attempt(manifest)`` on the index's current manifest, under its writer lock, started over
    while it raises _Changed (another writer changed the same segments meanwhile, and the attempt
    undid its own writes), ATTEMPTS times at most; the index's cached manifest then forgotten."""
    with index.storage.writer():
        for _attempt in range(ATTEMPTS):
            try:
                out = attempt(_current(index))
            except _Changed:
                continue
            break
        else:
            raise StorageError(f"index {index.display} kept changing under the removal ({ATTEMPTS} attempts); "
                               f"nothing was removed: try again")
    index.forget_manifest(segments=True)
    return out


def _write_tombstones(storage, manifest: dict, todo: Dict[str, np.ndarray]) -> Dict[str, dict]:
    """{segment name: its new tombstone entry}, each written (the old positions and the new)."""
    out: Dict[str, dict] = {}
    try:
        for entry in manifest["segments"]:
            new = todo.get(entry["name"])
            if new is None:
                continue
            dead = np.union1d(dead_positions(storage, entry), new).astype(np.uint32)
            src = np.asarray(storage.open_segment(entry).array("src.u32"))[dead].astype(np.int64)
            name = new_segment_name()
            files = storage.write_segment(name, {DEAD_FILE: dead})
            out[entry["name"]] = {"name": name, "docs": int(len(dead)),
                                  "source_docs": np.bincount(src, minlength=len(entry["sources"])).tolist(),
                                  "files": files}
    except BaseException:
        storage.drop_segments([d["name"] for d in out.values()])
        raise
    return out


def _switch(index, seen: dict, written: Dict[str, dict]):
    before = {e["name"]: dead_name(e) for e in seen["segments"]}

    def update(current):
        if current is None:
            raise StorageError(f"index {index.display} vanished during the removal")
        check_manifest(index.display, current, index.config)
        now = {e["name"]: dead_name(e) for e in current["segments"]}
        if any(name not in now or now[name] != before[name] for name in written):
            raise _Changed()
        segments = [dict(e, dead=written[e["name"]]) if e["name"] in written else e for e in current["segments"]]
        return dict(current, generation=current["generation"] + 1, segments=segments)

    return update


def _remove_bloom_segments(index, sources: Sequence[str]) -> dict:
    """A Bloom index's filters cannot forget a key, but a segment is one add's filters: the
    segments whose documents all come from the given sources are dropped from the manifest in
    one switch (then deleted). A segment that also holds another source's documents cannot be
    separated: refused, nothing removed."""
    t0 = time.perf_counter()
    storage = index.storage

    def attempt(manifest: dict) -> dict:
        found, drop, removed = set(), [], 0
        for entry in manifest["segments"]:
            named = [[s for s in sources if source_matches(s, name)] for name in entry["sources"]]
            for m in named:
                found.update(m)
            if not any(named):
                continue
            others = [name for name, m, c in zip(entry["sources"], named, entry["source_docs"]) if not m and c]
            if others:
                mine = [name for name, m in zip(entry["sources"], named) if m]
                raise ConfigError(
                    f"index {index.display} is a bloom index: its segment {entry['name']} holds the documents "
                    f"of {mine[0]!r} and of {others[0]!r}"
                    f"{f' (and {len(others) - 1} more)' if len(others) > 1 else ''} in the same filters, which "
                    f"cannot be separated; nothing was removed (remove all of the segment's sources together, "
                    f"or rebuild the index from the documents to keep)")
            drop.append(entry["name"])
            removed += int(entry["docs"])
        _all_found(index, manifest, sources, found)

        def update(current, seen=manifest, drop=set(drop)):
            if current is None:
                raise StorageError(f"index {index.display} vanished during the removal")
            check_manifest(index.display, current, index.config)
            if [e["name"] for e in current["segments"]] != [e["name"] for e in seen["segments"]]:
                raise _Changed()
            return dict(current, generation=current["generation"] + 1,
                        segments=[e for e in current["segments"] if e["name"] not in drop])

        commit_point()
        if drop:
            storage.commit(update)
        storage.drop_segments(drop)
        return {"removed": removed, "ids_given": 0, "ids_found": 0, "segments": len(drop)}

    return dict(_retried(index, attempt), seconds=round(time.perf_counter() - t0, 3))
