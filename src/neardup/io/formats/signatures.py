"""MinHash signatures as input: neardup's own signature files (``neardup signatures``) and
RedPajama-V2's ``{shard}.minhash.parquet``. A document is its signature, not its text: the read
stage takes the signature as it is instead of computing one, and a run verifies by the
signature estimate (there is no text to compare).

neardup's layout (one or several Parquet part files; every file holds the parameters in its
key-value metadata under :data:`META_KEY`, a JSON object: a folder of them is one dataset to
pyarrow, polars or DuckDB)::

    id          string            the document's id (its id column, or FILE:LINE / FILE:ROW)
    signature   list<uint32>      the k MinHash values
    shingles    int64             distinct shingles of the text (0: an empty document)
    length      int64             the text's length in bytes (for keep="longest")

The parameters that decide the values, :data:`VALUE_PARAMS` (k, seed, the word hash version and
the shingling), are in the metadata; a run whose own differ is refused (:func:`check_params`).

RedPajama-V2's layout (RedPajama-Data, ``app/src/dedupe/minhash.py``): ``id`` (string),
``id_int`` (uint64) and ``signature_sim{0.7,0.8,0.9,1.0}``, each a list of b bands (null for a
document of fewer words than the n-gram), a band the bytes of r big-endian uint32 MinHash
values (128 permutations, b and r chosen per threshold by datasketch's weighted optimiser).
The bands are read as shipped: their concatenation is the signature of b*r values, cut again
into RPv2's own b bands of r rows (two documents share a band key exactly when they share a
band's bytes); the estimate is the share of equal values of the concatenation. RPv2's hash and
shingling are not neardup's: such signatures mix neither with neardup's nor with an index.
"""

from __future__ import annotations

import json
from typing import Dict, Iterator, List, Optional, Sequence, Tuple

import numpy as np
import pyarrow as pa

from ...errors import ConfigError, InputError
from ..batch import EMPTY_FILE, Batch, ReadContext, one_line
from ..storage.tables import parquet_file

SIGNATURES = "signatures"          # --input-format of neardup's signature files
RPV2 = "rpv2-minhash"              # --input-format of RedPajama-V2's minhash.parquet
FORMATS = (SIGNATURES, RPV2)
META_KEY = b"neardup.signatures"   # the Parquet key-value metadata that holds the parameters
LAYOUT = 1                         # this layout's version, in the parameters as "layout"
# the options whose values decide a signature's values: a run or an index must have the same
VALUE_PARAMS = ("num_perm", "seed", "hash_version", "ngram", "char_ngrams", "normalize_unicode", "lowercase",
                "punctuation", "collapse_whitespace")
RPV2_COLUMN = "signature_sim{}"


def schema(params: dict) -> pa.Schema:
    """The schema of a signature file of ``params`` (:func:`signature_params`)."""
    return pa.schema([("id", pa.string()), ("signature", pa.list_(pa.uint32())), ("shingles", pa.int64()),
                      ("length", pa.int64())],
                     metadata={META_KEY: json.dumps(params, sort_keys=True).encode()})


def signature_params(config) -> dict:
    """What decides the values of a signature made under ``config``, as stored in its files."""
    return {"layout": LAYOUT, **{name: getattr(config, name) for name in VALUE_PARAMS}}


def signature_table(ids: pa.Array, sigs: np.ndarray, counts: np.ndarray, lengths: np.ndarray,
                    params: dict) -> pa.Table:
    """The rows of a signature file: ``sigs`` (n, k) uint32 as lists of k values."""
    n, k = sigs.shape
    offsets = pa.array(np.arange(0, (n + 1) * k, k, dtype=np.int32) if n else np.zeros(1, np.int32))
    values = pa.array(np.ascontiguousarray(sigs, np.uint32).reshape(-1))
    return pa.table([ids.cast(pa.string()), pa.ListArray.from_arrays(offsets, values),
                     pa.array(np.asarray(counts, np.int64)), pa.array(np.asarray(lengths, np.int64))],
                    schema=schema(params))


# --------------------------------------------------------------------------- parameters


def file_params(path: str, name: str) -> dict:
    """The parameters stored in a neardup signature file; a file without them is refused."""
    try:
        meta = parquet_file(path).schema_arrow.metadata or {}
        params = json.loads(meta[META_KEY]) if META_KEY in meta else None
    except (pa.ArrowException, OSError, ValueError) as e:
        raise InputError(f"{name}: not a readable Parquet file ({one_line(e)})") from None
    if not isinstance(params, dict) or params.get("layout") != LAYOUT:
        raise InputError(f"{name}: not a neardup signature file (no '{META_KEY.decode()}' metadata of layout "
                         f"{LAYOUT}); write one with 'neardup signatures', or read RedPajama-V2's minhash.parquet "
                         f"with --input-format {RPV2}")
    return params


def is_signature_file(path: str) -> bool:
    """Whether ``path`` is a neardup signature file (one an export may replace)."""
    try:
        return META_KEY in (parquet_file(path).schema_arrow.metadata or {})
    except (pa.ArrowException, OSError, ValueError):
        return False


def differences(theirs: dict, ours: dict, label: str = "this run") -> List[str]:
    """``name=THEIRS (LABEL: OURS)`` for each value parameter that differs (``label``: whose OURS is)."""
    return [f"{k}={theirs.get(k)!r} ({label}: {ours.get(k)!r})" for k in VALUE_PARAMS if theirs.get(k) != ours.get(k)]


def check_params(sources, config) -> dict:
    """The parameters of neardup signature files, checked: every file's the same, and the run's
    own (it is refused in one line, naming what differs, rather than taking theirs: an option
    given on the command line is never silently replaced); ``config`` None: the files' only."""
    ours = signature_params(config) if config is not None else None
    first = None
    for src in sources:
        params = file_params(src.path, src.name)
        if first is None:
            first = (src.name, params)
        elif differences(params, first[1]):
            diff = differences(params, first[1], "that file's")
            raise InputError(f"{src.name}: signatures made with other parameters than {first[0]}'s: {', '.join(diff)}")
        diff = differences(params, ours) if ours is not None else None
        if diff:
            raise ConfigError(f"{src.name}: signatures made with other parameters than this run's: "
                              f"{', '.join(diff)}; run with the parameters they were made with")
    return first[1] if first else ours


def rpv2_column(config, given: bool) -> str:
    """The similarity column of RedPajama-V2's file: the one named by --text-column when given,
    else the one of --threshold (``signature_sim0.8`` at 0.8)."""
    return config.text_column if given else RPV2_COLUMN.format(float(config.threshold))


def rpv2_shape(sources, column: str) -> Tuple[int, int]:
    """(bands, rows) of the column ``column`` of RedPajama-V2 files: from the first document with
    a signature; every file must have the column, and the same shape (checked again per row)."""
    shape = None
    for src in sources:
        try:
            pf = parquet_file(src.path)
        except (pa.ArrowException, OSError, ValueError) as e:
            raise InputError(f"{src.name}: not a readable Parquet file ({one_line(e)})") from None
        names = pf.schema_arrow.names
        if column not in names:
            have = [n for n in names if n.startswith("signature_sim")]
            raise ConfigError(f"{src.name}: no column {column!r} (it has {', '.join(have) or 'no signature_sim column'});"
                              f" choose one with --threshold or --text-column")
        if shape is None:
            for rb in pf.iter_batches(columns=[column], batch_size=4096):
                bands = rb.column(0).drop_null()
                if len(bands):
                    first = bands[0].values
                    shape = (len(first), len(first[0].as_py()) // 4)
                    break
    if shape is None or shape[1] == 0:
        raise InputError(f"no document with a signature in column {column!r} of the input")
    return shape


# --------------------------------------------------------------------------- readers


def _empty_texts(n: int) -> pa.Array:
    """n empty texts (the text of a signature's document is absent)."""
    return pa.LargeStringArray.from_buffers(n, pa.py_buffer(np.zeros(n + 1, np.int64)), pa.py_buffer(b""))


def _batches(ctx: ReadContext, columns: Sequence[str], decode) -> Iterator[Batch]:
    """The rows of a Parquet signature file as batches; ``decode(record batch, first row)`` gives
    (signatures, shingle counts, lengths) or raises InputError for a bad row."""
    try:
        pf = parquet_file(ctx.src.path)
        names = pf.schema_arrow.names
    except (pa.ArrowException, OSError, ValueError) as e:
        yield from ctx.problem(f"not a readable Parquet file ({one_line(e)})")
        return
    if pf.metadata.num_rows == 0:
        yield from ctx.skipped(EMPTY_FILE)
        return
    wanted = list(columns) + [c for c in (ctx.id_column, ctx.score_column) if c is not None]
    missing = [c for c in wanted if c not in names]
    if missing:
        yield from ctx.problem(f"no column {missing[0]!r} (columns: {', '.join(names[:20])})")
        return
    row0 = 0
    for rb in pf.iter_batches(batch_size=ctx.batch_size, columns=wanted):
        n = rb.num_rows
        sigs, counts, lengths = decode(ctx, rb, row0)
        ids = rb.column(ctx.id_column).cast(pa.string()) if ctx.id_column is not None else None
        if ids is not None and ids.null_count:
            raise ctx.error(row0 + int(np.flatnonzero(ids.is_null().to_numpy(zero_copy_only=False))[0]),
                            f"null id in column {ctx.id_column!r}")
        scores = None
        if ctx.score_column is not None:
            scores = rb.column(ctx.score_column).cast(pa.float64()).fill_null(float("nan")).to_numpy(zero_copy_only=False)
        yield Batch(source_index=ctx.source_index, rows=np.arange(row0, row0 + n, dtype=np.int64),
                    text=_empty_texts(n), ids=ids, scores=scores, signatures=sigs, counts=counts, lengths=lengths)
        row0 += n


def _neardup_rows(ctx: ReadContext, rb: pa.RecordBatch, row0: int):
    lists = rb.column("signature")
    offsets = lists.offsets.to_numpy()
    sizes = np.diff(offsets)
    k = int(json.loads(rb.schema.metadata[META_KEY])["num_perm"])  # the file's own, checked against the run's
    bad = np.flatnonzero((sizes != k) | lists.is_null().to_numpy(zero_copy_only=False))
    if len(bad) or k == 0:
        raise ctx.error(row0 + int(bad[0] if len(bad) else 0), f"a signature of another length than the file's "
                                                               f"num_perm ({k})")
    values = lists.values.slice(offsets[0], offsets[-1] - offsets[0]).to_numpy(zero_copy_only=False)
    sigs = np.ascontiguousarray(values, np.uint32).reshape(len(sizes), k)
    return (sigs, rb.column("shingles").fill_null(0).to_numpy(zero_copy_only=False).astype(np.int64),
            rb.column("length").fill_null(0).to_numpy(zero_copy_only=False).astype(np.int64))


def read_signatures(ctx: ReadContext) -> Iterator[Batch]:
    """A neardup signature file (:func:`schema`)."""
    yield from _batches(ctx, ["signature", "shingles", "length"], _neardup_rows)


def _rpv2_rows(ctx: ReadContext, rb: pa.RecordBatch, row0: int):
    """RPv2 bands: list<binary> of b bands of 4r bytes; a null list is an empty document."""
    column = rb.column(ctx.text_column)
    n = len(column)
    present = ~column.is_null().to_numpy(zero_copy_only=False)
    bands = column.drop_null()
    per_doc = np.diff(bands.offsets.to_numpy())
    flat = bands.flatten()
    lengths = pc_lengths(flat)
    b = int(per_doc[0]) if len(per_doc) else 0
    width = int(lengths[0]) if len(lengths) else 0
    bad = np.flatnonzero(per_doc != b) if len(per_doc) else []
    if len(bad) or (len(lengths) and (np.any(lengths != width) or width % 4 or width == 0)):
        where = row0 + int(np.flatnonzero(present)[bad[0] if len(bad) else 0])
        raise ctx.error(where, f"column {ctx.text_column!r}: bands of other sizes than the first's "
                               f"(RedPajama-V2 bands: a list of b byte strings of r big-endian uint32)")
    k = b * width // 4
    sigs = np.zeros((n, k), np.uint32)
    if len(flat):
        kind = np.int64 if pa.types.is_large_binary(flat.type) else np.int32
        offsets = np.frombuffer(flat.buffers()[1], kind)[flat.offset:flat.offset + len(flat) + 1]
        raw = np.frombuffer(flat.buffers()[2], np.uint8)[offsets[0]:offsets[-1]]
        sigs[present] = raw.view(">u4").astype(np.uint32).reshape(-1, k)
    counts = present.astype(np.int64)  # 1: has a signature; 0: RPv2 made none (an empty document)
    return sigs, counts, np.zeros(n, np.int64)


def pc_lengths(arr: pa.Array) -> np.ndarray:
    import pyarrow.compute as pc
    return pc.binary_length(arr).to_numpy(zero_copy_only=False).astype(np.int64) if len(arr) else np.zeros(0, np.int64)


def read_rpv2(ctx: ReadContext) -> Iterator[Batch]:
    """A RedPajama-V2 ``minhash.parquet`` file, its column ``ctx.text_column``."""
    yield from _batches(ctx, [ctx.text_column], _rpv2_rows)


def field_names(src) -> List[str]:
    return parquet_file(src.path).schema_arrow.names


def signature_formats_note(fmt: str, shape: Optional[Tuple[int, int]], column: Optional[str]) -> str:
    """The note of a run from signatures, in its summary and stats."""
    if fmt == RPV2:
        b, r = shape
        return (f"read RedPajama-V2 MinHash signatures ({column}: {b} bands x {r} rows as shipped), no text: "
                f"verified by the estimate of their {b * r} values; RPv2's hash and shingling are not neardup's "
                f"(they mix neither with neardup signatures nor with an index)")
    return "read neardup signatures, no text: candidate pairs verified by the signature estimate"


def given_formats() -> Dict[str, object]:
    return {SIGNATURES: read_signatures, RPV2: read_rpv2}
