"""``neardup index add --input-format signatures``: documents added as the signatures of
``neardup signatures`` (:mod:`neardup.io.formats.signatures`), without their texts.

Their band keys are made from the signatures with the index's bands, rows and seed; the index
keeps the signatures (an ``estimate`` index, or a bloom one): an index that keeps shingle
fingerprints (``exact``) cannot take them (there is no text to take them from). The values of
a signature depend on k, the seed, the word hash and the shingling: those of the files must be
the index's (an existing index refuses others in one line; a new one takes theirs).
RedPajama-V2's signatures (another hash and shingling) are refused."""

from __future__ import annotations

from typing import Optional, Sequence, Tuple

from .. import io as nio
from ..errors import ConfigError, StorageError
from ..io.columns import positional_ids
from ..io.formats import signatures as fmt
from ..kernels.bands import band_keys
from .core import Index
from .inputs import index_path


def add_signature_files(location, inputs: Sequence[str], *, input_format: str, name: Optional[str],
                        id_column: Optional[str], on_error: str, kind: Optional[str],
                        false_positive_rate: Optional[float], options: dict) -> Tuple[Index, dict]:
    """Adds the documents of neardup signature files to the index at ``location`` (see the
    module's docstring); returns the index and the add's counts."""
    if input_format == fmt.RPV2:
        raise ConfigError("RedPajama-V2 signatures (another hash and shingling than neardup's) cannot be added "
                          "to an index; deduplicate them on their own (neardup dedup --input-format rpv2-minhash)")
    sources = nio.discover(list(inputs), input_format=fmt.SIGNATURES)
    theirs = fmt.check_params(sources, None)
    given = {k: options[k] for k in fmt.VALUE_PARAMS if k in options}
    diff = fmt.differences(theirs, {**theirs, **given})
    if diff:
        raise ConfigError(f"signatures made with other parameters than those given: {', '.join(diff)}")
    wanted = {**options, **{k: theirs[k] for k in fmt.VALUE_PARAMS}}
    try:  # an existing index: compared with its own parameters (refused when they differ)
        index = Index(location, must_exist=True, kind=kind, false_positive_rate=false_positive_rate, **wanted)
    except StorageError as exc:
        if not str(exc).startswith("no index at"):
            raise
        if kind != "bloom":
            wanted.setdefault("verify", "estimate")  # a new index keeps the signatures
        index = Index(location, kind=kind, false_positive_rate=false_positive_rate, **wanted)
    if index.store == "exact":
        raise ConfigError(f"index {index.display} keeps shingle fingerprints (verify exact), and signatures carry "
                          f"no text to take them from; add signatures to an index made with --verify estimate "
                          f"(or --kind bloom)")
    chosen = nio.choose_id_column(sources, id_column)[0]
    cfg = index.config
    with index.writer() as w:
        for si, src in enumerate(sources):
            for batch in nio.read_source(src, si, id_column=chosen, on_error=on_error, batch_size=cfg.batch_size):
                w.rejected += len(batch.rejected)
                if len(batch.rows) == 0:
                    continue
                ids = batch.ids if batch.ids is not None else positional_ids(src, batch.rows, index_path(src, name))
                keys = band_keys(batch.signatures, cfg.bands, cfg.rows, cfg.seed)
                w.add_arrays(keys, ids, name or src.name, signatures=batch.signatures)
        w.notes.append("added from signatures (no text): verified by the signature estimate")
    return index, w.result
