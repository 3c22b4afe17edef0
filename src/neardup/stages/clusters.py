"""Stage ``clusters``: verified pairs of whole clusters -> members with their representative.

A partition holds whole connected components (the local driver: all of them; the Ray driver:
those whose label hashes to the partition, after distributed connected components).
:func:`select_partition` renumbers the partition's documents in ascending order, so that keep
order and ties are those of the whole corpus, and runs the chain-guarded selection of
:func:`neardup.clusters.select_representatives`.
"""

from __future__ import annotations

from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..arrays import arrow
from .. import io as nio
from ..clusters import keep_order, select_representatives
from .layout import MEMBERS_SCHEMA

TOP_CLUSTERS = 20      # clusters shown in the report
TOP_MEMBERS = 5        # members shown of each


def document_ids(source: np.ndarray, row: np.ndarray, user_ids: Optional[pa.Array],
                 sources: Sequence[nio.Source]) -> pa.Array:
    """The id of each document: the user's id column, the path of a text file, 'NAME:LINE' for
    JSONL (lines counted from 1, as in an editor and in neardup's messages) or 'NAME:ROW' for
    Parquet and tables (rows counted from 0, as in pyarrow and pandas, and as messages say
    'row N')."""
    if user_ids is not None:
        return user_ids.cast(pa.string())
    out = []
    for s, r in zip(source.tolist(), row.tolist()):
        src = sources[s]
        if src.format == "text":
            out.append(src.name)
        else:
            out.append(f"{src.name}:{r + 1 if src.format == 'jsonl' else r}")
    return arrow(out, pa.string())


def select_partition(docs: np.ndarray, attrs: Dict[str, np.ndarray], user_ids: Optional[pa.Array],
                     left: np.ndarray, right: np.ndarray, similarity: np.ndarray, config,
                     sources: Sequence[nio.Source]) -> Tuple[pa.Table, dict]:
    """``docs``: the partition's documents, ascending, with their ``attrs`` (source, row, length,
    score) and user ids; ``left``/``right``: its verified pairs (document indices).
    Returns the members (MEMBERS_SCHEMA, document order) and the counts with the partition's
    largest clusters, ``top``: [{"head", "size", "members": [[doc, id, source, row], ...]}]."""
    m = len(docs)
    li = np.searchsorted(docs, left)
    ri = np.searchsorted(docs, right)
    rank = keep_order(m, config.keep, lengths=attrs.get("length"), scores=attrs.get("score"))
    sel = select_representatives(m, li, ri, similarity, rank)
    source = attrs["source"].astype(np.int32)
    row = attrs["row"].astype(np.int64)
    ids = document_ids(source, row, user_ids, sources)
    head = sel.cluster
    removed = sel.removed
    rep = np.where(removed, sel.representative, 0)
    members = pa.table({
        "doc": arrow(docs), "source": arrow(source), "row": arrow(row),
        "cluster": arrow(docs[head]), "representative": arrow(np.where(removed, docs[rep], -1)),
        "similarity": arrow(sel.similarity), "removed": arrow(removed), "id": ids,
        "cluster_id": ids.take(arrow(head)),
        "representative_id": pc.if_else(arrow(removed), ids.take(arrow(rep)), pa.nulls(m, pa.string())),
        "representative_source": pa.nulls(m, pa.string()),
    }, schema=MEMBERS_SCHEMA)
    heads, sizes = np.unique(head, return_counts=True)
    best = heads[np.lexsort((heads, -sizes))][:TOP_CLUSTERS]
    top: List[dict] = []
    for h in best.tolist():
        ms = np.flatnonzero(head == h)
        shown = np.concatenate([[h], ms[ms != h]])[:TOP_MEMBERS]
        top.append({"head": int(docs[h]), "size": int(len(ms)),
                    "members": [[int(docs[i]), ids[i].as_py(), int(source[i]), int(row[i])] for i in shown.tolist()]})
    counts = {"members": m, "removed": int(removed.sum()), "clusters": int(len(heads)), "top": top}
    return members, counts


def merge_counts(parts: Sequence[dict]) -> dict:
    """The counts of every partition together (the largest clusters over all of them)."""
    top = sorted((c for p in parts for c in p["top"]), key=lambda c: (-c["size"], c["head"]))[:TOP_CLUSTERS]
    return {"members": sum(p["members"] for p in parts), "removed": sum(p["removed"] for p in parts),
            "clusters": sum(p["clusters"] for p in parts), "top": top}
