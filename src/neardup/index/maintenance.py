"""What an index holds and whether it is sound: :func:`stats` (documents, sources, bytes),
:func:`check_files` (every file present and of its size: cheap, run by every writer) and
:func:`verify` (every byte of every file read and checked). Compaction is in :mod:`.compaction`.
"""

from __future__ import annotations

from typing import Dict, List, Optional, Tuple

import numpy as np

from ..errors import StorageError
from ..progress import check_interrupt
from . import bloom as bloom_tier
from . import segments as layout
from .manifest import check_manifest
from .removal import DEAD_FILE, dead_problems, live_docs
from .segments import checksum, structure_problems
from .storage import entry_files


def committed_manifest(index) -> dict:
    """The index's manifest as stored now (not the one a query may hold for ``refresh``
    seconds), checked against the index's parameters; no index there is an error."""
    manifest = index.storage.read_manifest()
    if manifest is None:
        raise StorageError(f"no index at {index.display}")
    check_manifest(index.display, manifest, index.config)
    return manifest


LARGEST_SOURCES = 10  # the sources a bounded stats lists (Index.stats(full=False), `neardup index stats`)


def stats(index, full: bool = True) -> dict:
    """See :meth:`neardup.Index.stats`."""
    manifest = committed_manifest(index)
    docs = sum(live_docs(s) for s in manifest["segments"])
    per_source: Dict[str, int] = {}
    per_file: Dict[str, int] = {}
    for s in manifest["segments"]:
        dead = s["dead"]["source_docs"] if s.get("dead") else [0] * len(s["sources"])
        for name, count, gone in zip(s["sources"], s["source_docs"], dead):
            per_source[name] = per_source.get(name, 0) + count - gone
        files = list(s["files"].items()) + (list(s["dead"]["files"].items()) if s.get("dead") else [])
        for f, info in files:
            per_file[f] = per_file.get(f, 0) + info["bytes"]
    total = sum(per_file.values())
    out = {"location": index.display, "documents": docs, "segments": len(manifest["segments"]),
           "removed": sum(s["docs"] for s in manifest["segments"]) - docs,
           **(source_counts(per_source) if not full else {"sources": per_source}), "bytes": total,
           "bytes_per_document": round(total / docs, 1) if docs else None,
           "bytes_per_document_by_file": {f: round(b / docs, 1) for f, b in sorted(per_file.items())} if docs else {},
           "store": manifest["store"], "params": manifest["params"], "generation": manifest["generation"]}
    if manifest["store"] == "bloom":
        out["kind"] = "bloom"
        out["false_positive_rate"] = manifest["bloom"]["false_positive_rate"]
        out["extra_false_positive_rate"] = bloom_tier.index_rate(manifest)
    else:
        out["kind"] = "exact"
    return out


def source_counts(per_source: Dict[str, int]) -> dict:
    """The sources in a bounded form: how many, and the :data:`LARGEST_SOURCES` holding the most
    documents (ties in name order), each with its documents."""
    largest = sorted(per_source.items(), key=lambda kv: (-kv[1], kv[0]))[:LARGEST_SOURCES]
    return {"source_count": len(per_source), "largest_sources": dict(largest)}


def check_files(index, manifest: dict) -> None:
    """See :meth:`neardup.Index.check_files`."""
    for entry in manifest["segments"]:
        for part in [entry] + ([entry["dead"]] if entry.get("dead") else []):
            sizes = index.storage.file_sizes(part)
            for file, info in entry_files(part, index.display).items():
                if sizes[file] is None:
                    raise StorageError(f"corrupt index {index.display}: segment {part['name']} has lost its file {file}")
                if sizes[file] != info["bytes"]:
                    raise StorageError(f"corrupt index {index.display}: segment {part['name']} file {file} has "
                                       f"{sizes[file]} bytes, the manifest says {info['bytes']}")


def verify(index) -> dict:
    """See :meth:`neardup.Index.verify`."""
    manifest = committed_manifest(index)
    problems: List[str] = []
    checked = 0
    for entry in manifest["segments"]:
        check_interrupt()  # a segment at a time (it only reads: nothing to leave as it was)
        for part in [entry] + ([entry["dead"]] if entry.get("dead") else []):
            arrays, part_problems, part_bytes = _read_checked(index, part)
            problems.extend(part_problems)
            checked += part_bytes
            if arrays is None:
                continue
            if part is entry:
                problems.extend(bloom_tier.structure_problems(entry, arrays, index.config.bands)
                                if index.store == "bloom" else
                                structure_problems(entry, arrays, index.store, index.config.bands,
                                                   index.config.num_perm))
            elif DEAD_FILE not in arrays:
                problems.append(f"segment {entry['name']} tombstone {part['name']}: the manifest lists no file {DEAD_FILE}")
            else:
                problems.extend(dead_problems(entry, arrays[DEAD_FILE]))
    return {"segments": len(manifest["segments"]), "documents": sum(live_docs(s) for s in manifest["segments"]),
            "bytes": checked, "problems": problems}


def _read_checked(index, part: dict) -> Tuple[Optional[Dict[str, np.ndarray]], List[str], int]:
    """Every file of a segment (or of a tombstone) read whole and checked against the manifest:
    (its arrays, or None when one of them could not be used; the problems found; the bytes read)."""
    name = part["name"]
    try:
        files = entry_files(part, index.display)
        sizes = index.storage.file_sizes(part)
    except StorageError as exc:
        return None, [f"segment {name}: {exc}"], 0
    arrays: Dict[str, np.ndarray] = {}
    problems: List[str] = []
    checked = 0
    for file, info in files.items():
        if sizes.get(file) is None:
            problems.append(f"segment {name} file {file}: missing")
            continue
        if sizes[file] != info["bytes"]:
            problems.append(f"segment {name} file {file}: {sizes[file]} bytes, the manifest says {info['bytes']}")
            continue
        raw = index.storage.read_file(part, file)
        if raw is None:
            problems.append(f"segment {name} file {file}: missing")
            continue
        checked += info["bytes"]
        got = checksum(raw)
        if info.get("crc32") is not None and got != info["crc32"]:
            problems.append(f"segment {name} file {file}: does not match its checksum (crc32 {got:08x}, "
                            f"the manifest says {info['crc32']:08x})")
            continue
        itemsize = np.dtype(layout.FILE_DTYPES[file]).itemsize
        if info["bytes"] % itemsize:
            problems.append(f"segment {name} file {file}: {info['bytes']} bytes, not whole values of "
                            f"{itemsize} bytes")
            continue
        arrays[file] = np.asarray(raw).view(np.uint8).view(layout.FILE_DTYPES[file])
    return (arrays if len(arrays) == len(files) else None), problems, checked
