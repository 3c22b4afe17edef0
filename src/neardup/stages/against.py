"""Deduplicating against indexes (``--against INDEX``, ``--update-index``).

The read stage matches each block's documents against every index given, with the index's own
seam (:meth:`neardup.index.Index.match`) and the band keys and shingle hashes or signatures it
has just computed: a document with a verified match at or above the threshold is removed with the
indexed document as its representative (the best match over all indexes; ties: the earlier
index). A Bloom index (``--kind bloom``) answers yes without a representative or a similarity:
such a document is removed with an empty representative and the source ``bloom:INDEX``, unless
another index gave it a verified match, which wins. Matched documents take no part in the run's
own pairs, as if the indexed documents came first in keep order and were all kept. One file a block, written before the block's summary:

    WORK/read/block-BBBBBB.against.parquet   MATCHED_SCHEMA: pos (in the block), id, source, similarity

The threshold is the run's; the bands and rows of an index are its own. When they differ from the
run's (a run at another threshold), the block's band keys for that index are made from the
signatures as the block is read (:class:`BlockMatcher`); those of the first index are kept for
``--update-index`` when they differ:

    WORK/read/block-BBBBBB.index-keys.parquet   keys (fixed-size binary, bands x 8 bytes)

The block's summary counts, per index, the matches and the band buckets cut at ``MAX_BUCKET``
candidates (:func:`index_stats` sums them into stats.json's ``indexes``).

After a successful run, ``--update-index`` adds the kept documents to the first index as one
segment (:func:`update_index`).
"""

from __future__ import annotations

from typing import Dict, List, Tuple

import numpy as np
import pyarrow as pa

from ..kernels.arrays import arrow, empty_table, to_numpy
from ..io.storage.folder import Folder
from ..io.storage.paths import redact
from .corpus import DocStore, column, document_ids, fixed_binary_numpy, numpy_fixed_binary
from .workdir import MEMBERS_SCHEMA, block_name, members_table

BLOOM_RANK = -0.5  # a bloom index's yes: above no match, below every verified one (similarities are >= 0)
MATCHED_SCHEMA = pa.schema([("pos", pa.int64()), ("id", pa.string()), ("source", pa.string()),
                            ("similarity", pa.float64())])


def snapshot_name(i: int) -> str:
    """The state of the i-th ``--against`` index that the run reads, in the work dir."""
    return f"read/against-{i:03d}.manifest.json"


def pin_indexes(work: Folder, config) -> None:
    """Records, before the first block is read, the state (manifest) of every ``--against``
    index: every block reads that state, whatever commits meanwhile (an add, a compaction), and a
    resumed run reads the same one (kept in the work dir). A Bloom index whose extra
    false-positive rate is above ``REFUSE_RATE`` is refused here: it would remove that share of the
    documents that have no near-duplicate in it."""
    from ..index import Index
    from ..index.bloom import refuse_rate
    for i, location in enumerate(config.against):
        if work.exists(snapshot_name(i)):
            continue  # a resumed run: the state it started with
        with Index(location, config, must_exist=True) as index:
            manifest = index.snapshot()
            refuse_rate(index.display, manifest, "dedup --against would remove documents by it")
        work.write_json(snapshot_name(i), manifest)


def pinned(work: Folder, i: int, index) -> dict:
    """Pins ``index`` (the i-th --against) at the state the run started with; returns that state."""
    if not work.exists(snapshot_name(i)):  # a run that read its blocks before states were pinned
        manifest = index.snapshot()
    else:
        manifest = work.load_json(snapshot_name(i))
    index.pin(manifest)
    return manifest


# what each kind of index keeps to verify a match, and the --verify values whose read stage gives it
VERIFIES_BY = {"exact": ("shingle fingerprints", ("exact",)),
               "estimate": ("signatures", ("estimate", "none"))}


def check_indexes(config) -> None:
    """Before a run writes anything (its output and work dir not yet claimed): every ``--against``
    index exists, was built with the run's parameters (hash version included), and verifies by
    what the run's ``--verify`` computes; one line otherwise (ConfigError, StorageError), in the
    command line's words. A run refused here leaves nothing behind."""
    from ..errors import ConfigError
    from ..index import Index
    from ..index.bloom import refuse_rate
    for location in config.against:
        with Index(location, config, must_exist=True) as index:
            refuse_rate(index.display, index.snapshot(), "dedup --against would remove documents by it")
            if index.store not in VERIFIES_BY or config.verify in VERIFIES_BY[index.store][1]:
                continue
            kept, verifies = VERIFIES_BY[index.store]
            made = "--verify " + " or --verify ".join(verifies)
            raise ConfigError(f"index {index.display} keeps {kept} (it was built with --verify "
                              f"{verifies[0]}), which a run with --verify {config.verify} does not compute: run "
                              f"with {made} (verify={verifies[0]!r}), or use an index built with --verify "
                              f"{config.verify}")


def banding(location, config):
    """(bands, rows) of an index (it must exist; its parameters are checked against the run's)."""
    from ..index import Index
    with Index(location, config, must_exist=True) as index:
        return index.config.bands, index.config.rows


class BlockMatcher:
    """``--against`` for one block being read: :meth:`signatures` takes each batch's signatures
    (band keys are made from them for the indexes whose bands and rows are not the run's), and
    :meth:`finish` matches the block's documents once its files are complete."""

    def __init__(self, work: Folder, block: int, config):
        self.work, self.block, self.config = work, block, config
        self.bandings = [banding(location, config) for location in config.against]
        own = (config.bands, config.rows)
        self.keys: Dict[Tuple[int, int], List[np.ndarray]] = {b: [] for b in self.bandings if b != own}

    def signatures(self, sig: np.ndarray) -> None:
        from ..kernels.bands import band_keys
        for (bands, rows), parts in self.keys.items():
            parts.append(band_keys(sig, bands, rows, self.config.seed))

    def finish(self, documents: int) -> dict:
        keys = {b: (np.concatenate(p) if p else np.zeros((0, b[0]), np.uint64)) for b, p in self.keys.items()}
        if self.config.update_index and self.bandings[0] in keys:
            self.work.write_parquet(block_name(self.block, "index-keys.parquet"),
                                    pa.table({"keys": numpy_fixed_binary(keys[self.bandings[0]])}))
        matched, per_index = match_block(self.work, self.block, documents, self.config, keys)
        return {"against_matched": matched, "against": per_index}


def match_block(work: Folder, block: int, n: int, config, keys_of: Dict[Tuple[int, int], np.ndarray]):
    """Matches the ``n`` documents just read as block ``block`` against every index given (each
    refuses a run whose parameters differ from its own); writes its file; returns how many
    matched, and per index its matches and the buckets it cut. ``keys_of``: the documents' band
    keys by (bands, rows) where those are not the run's."""
    from ..index import Index
    store = DocStore.of_block(work, block, n, config.num_perm)
    pos = np.arange(n, dtype=np.int64)
    exact = config.verify == "exact"
    best_sim = np.full(n, -1.0)
    best_rank = np.full(n, -1.0)
    best_id: List = [None] * n
    best_src: List = [None] * n
    per_index = []
    if n:
        own = fixed_binary_numpy(store.table(block, ["keys"]).column(0), np.uint64, config.bands)
        shingles = store.fingerprints(pos) if exact else None
        signatures = None if exact else store.signatures(pos)
        for i, location in enumerate(config.against):
            # opened for the block and closed after it: a call holds nothing between blocks (an
            # open costs a manifest read, small next to a block's matching); pinned at the state
            # the run started with (:func:`pin_indexes`)
            with Index(location, config, must_exist=True) as index:
                state = pinned(work, i, index)
                keys = keys_of.get((index.config.bands, index.config.rows), own)
                m = index.match(keys, signatures=signatures, shingles=shingles, threshold=config.threshold)
                ids, sources = m.id.to_pylist(), m.source.to_pylist()
                found = zip(np.asarray(m.doc).tolist(), np.asarray(m.similarity).tolist())
                for i, (p, s) in enumerate(found):
                    # strictly better: a tie keeps the earlier index; a bloom index's yes (nan: not
                    # verified, no id) ranks below any verified match
                    rank = s if s == s else BLOOM_RANK
                    if rank > best_rank[p]:
                        best_rank[p], best_sim[p], best_id[p], best_src[p] = rank, s, ids[i], sources[i]
                per_index.append({"matched": len(m), "truncated_buckets": m.truncated_buckets,
                                  "truncated_candidates": m.truncated, **kind_of_state(state)})
    hit = np.flatnonzero(best_rank > -1.0)
    work.write_parquet(block_name(block, "against.parquet"),
                       pa.table({"pos": arrow(hit), "id": arrow([best_id[i] for i in hit], pa.string()),
                                 "source": arrow([best_src[i] for i in hit], pa.string()),
                                 "similarity": arrow(best_sim[hit])}, schema=MATCHED_SCHEMA))
    return int(len(hit)), per_index


def kind_of_state(manifest: dict) -> dict:
    """What a block records of the state of an index it read: its generation, its kind and, for
    a Bloom index, the per-filter rate and the extra false-positive rate F of that state."""
    from ..index.bloom import index_rate, kind_of
    out = {"generation": manifest["generation"], "kind": kind_of(manifest["store"]), "store": manifest["store"]}
    if manifest["store"] == "bloom":
        out["false_positive_rate"] = manifest["bloom"]["false_positive_rate"]
        out["extra_false_positive_rate"] = index_rate(manifest)
    return out


def index_stats(config, summaries) -> List[dict]:
    """stats.json's ``indexes``: per ``--against`` index, its bands and rows, P(candidate) of a
    pair at the run's threshold with them, the documents it matched (before the best match over
    the indexes was taken) and the band buckets cut at ``MAX_BUCKET`` candidates; the state read
    (generation, kind; a Bloom index's false-positive rates, and ``rate_warning`` when its F is
    above ``INDEX_RATE``)."""
    from ..index.bloom import INDEX_RATE
    from ..index import Index
    from ..index.core import MAX_BUCKET
    out = []
    for i, location in enumerate(config.against):
        with Index(location, config, must_exist=True) as index:
            row = {"index": redact(location), "bands": index.config.bands, "rows": index.config.rows,
                   "candidate_probability": round(index.candidate_probability(config.threshold), 4),
                   "recall_note": index.recall_note(config.threshold), "max_bucket": MAX_BUCKET}
        for key in ("matched", "truncated_buckets", "truncated_candidates"):
            row[key] = int(sum(s["against"][i][key] for s in summaries if s.get("against")))
        states = [s["against"][i] for s in summaries if s.get("against") and "kind" in s["against"][i]]
        if states:  # every block read the same (pinned) state
            row.update({k: v for k, v in states[0].items() if k not in row and k not in
                        ("matched", "truncated_buckets", "truncated_candidates")})
            f = row.get("extra_false_positive_rate")
            row["rate_warning"] = (f"bloom index {row['index']} has an extra false-positive rate of {f:.2e} (above "
                                   f"{INDEX_RATE:g}): about that share of the documents with no near-duplicate "
                                   f"there were removed by it") if f is not None and f > INDEX_RATE else None
        out.append(row)
    return out


def _matches(work: Folder, block: int) -> pa.Table:
    name = block_name(block, "against.parquet")
    return work.read_table(name) if work.exists(name) else empty_table(MATCHED_SCHEMA)


def matched_docs(work: Folder, block_start: np.ndarray) -> np.ndarray:
    """Every matched document (ascending document indices)."""
    parts = [to_numpy(_matches(work, b).column("pos")) + block_start[b] for b in range(len(block_start) - 1)]
    return np.concatenate(parts).astype(np.int64) if parts else np.zeros(0, np.int64)


def matched_members(work: Folder, store: DocStore, with_ids: bool, sources, blocks=None) -> pa.Table:
    """The matched documents (of ``blocks``, default every block) as member rows (MEMBERS_SCHEMA):
    removed, their representative the indexed document (its id and source; no document index
    here: -1)."""
    tables = []
    for b in (range(len(store.block_start) - 1) if blocks is None else blocks):
        m = _matches(work, b)
        if m.num_rows == 0:
            continue
        docs = to_numpy(m.column("pos")) + store.block_start[b]
        attrs = store.columns(docs, ["source", "row"])
        source, row = attrs["source"].astype(np.int32), attrs["row"].astype(np.int64)
        ids = document_ids(source, row, store.ids(docs) if with_ids else None, sources)
        n = len(docs)
        tables.append(members_table(docs, source, row, np.full(n, -1, np.int64), np.full(n, -1, np.int64),
                                    column(m, "similarity", np.float64), np.ones(n, bool), ids, m.column("id"),
                                    m.column("id"), m.column("source")))
    return pa.concat_tables(tables) if tables else empty_table(MEMBERS_SCHEMA)


def update_index(run) -> dict:
    """Adds the run's kept documents (every document less those removed, rejected after reading
    or matched in an index) to the first index given, as one segment committed at the end (all of
    them or none)."""
    from ..index import Index
    from ..index.inputs import index_path
    cfg, store = run.config, run.store
    removed = [run.work.folder.read_table(p, columns=["doc", "removed"]) for p in run.work.parts("clusters")]
    dropped = np.unique(np.concatenate([run.excluded_from_pairs()] + [
        to_numpy(t.filter(t.column("removed")).column("doc").combine_chunks()) for t in removed]).astype(np.int64))
    with_ids = run.user_ids_wanted()
    index = Index(cfg.against[0], cfg, must_exist=True)
    names = [s.name for s in run.sources]
    added = 0
    with index.writer() as w:
        for b in range(len(store.block_start) - 1):
            docs = np.arange(store.block_start[b], store.block_start[b + 1], dtype=np.int64)
            docs = docs[~np.isin(docs, dropped)]
            if len(docs) == 0:
                continue
            t = store.table(b, ["source", "row", "keys"]).take(arrow(docs - store.block_start[b]))
            source, row = to_numpy(t.column("source")), to_numpy(t.column("row"))
            # positional ids by the index's rule (the file as named, its source there): runs over
            # dumps of one layout add distinct ids, where the run's own (FILE:LINE below the
            # inputs' folder) would repeat and be refused
            ids = document_ids(source, row, store.ids(docs) if with_ids else None, run.sources,
                               path_of=lambda src: index_path(src, None))
            if (index.config.bands, index.config.rows) == (cfg.bands, cfg.rows):
                keys = fixed_binary_numpy(t.column("keys"), np.uint64, cfg.bands)
            else:  # the index's own bands and rows, made at read time
                own = run.work.folder.read_table(block_name(b, "index-keys.parquet")).column("keys")
                keys = fixed_binary_numpy(own.take(arrow(docs - store.block_start[b])), np.uint64,
                                          index.config.bands)
            if cfg.verify == "exact":
                w.add_arrays(keys, ids, [names[s] for s in source.tolist()], shingles=store.fingerprints(docs))
            else:
                w.add_arrays(keys, ids, [names[s] for s in source.tolist()], signatures=store.signatures(docs))
            added += len(docs)
    from ..index.bloom import rate_note
    note = rate_note(index.display, index.snapshot()) if index.store == "bloom" else None
    index.close()
    return {"index": redact(cfg.against[0]), "added": added, **({"rate_warning": note} if note else {})}
