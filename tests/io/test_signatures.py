"""Signatures out and in (issue 31): ``neardup signatures`` writes each document's MinHash
signature with the parameters that made it; ``dedup --input-format signatures`` reads them back
instead of the text (verified by the estimate), and ``--input-format rpv2-minhash`` reads
RedPajama-V2's minhash.parquet, its bands as shipped."""

import json
import random

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import neardup
from neardup.errors import ConfigError, InputError
from neardup.io import discover, read_source
from neardup.io.formats.signatures import META_KEY, VALUE_PARAMS

from helpers import run_in_process, write_jsonl

COMPARED = ["id", "representative", "cluster", "similarity"]  # source/row name the file read: they differ


def _corpus():
    rnd = random.Random(1)
    words = [f"w{i}" for i in range(400)]
    texts, ids = [], []
    for i in range(30):
        t = " ".join(rnd.choice(words) for _ in range(60))
        texts.append(t)
        ids.append(f"d{i}")
        if i % 4 == 0:  # a near-duplicate: one word changed
            w = t.split()
            w[5] = "changed"
            texts.append(" ".join(w))
            ids.append(f"d{i}x")
    texts.append("")  # an empty document: kept, never paired
    ids.append("empty")
    return texts, ids


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    """A JSONL corpus with planted near-duplicates, and its signatures written by the command line."""
    d = tmp_path_factory.mktemp("sig")
    texts, ids = _corpus()
    corpus = write_jsonl(d / "c.jsonl", texts, ids)
    ran = run_in_process("signatures", corpus, "--output", d / "sig")
    assert ran.returncode == 0, ran.stderr
    return d, corpus, d / "sig"


def test_signatures_read_back_remove_what_the_text_removes(exported):
    # mutation guarded: stages/read.py _process without its `if batches[0].signatures is not None`
    # branch (the empty texts hashed: nothing removed)
    d, corpus, sig = exported
    from_text = neardup.dedup(corpus, d / "from_text", verify="estimate")
    from_sigs = neardup.dedup(sig, d / "from_sigs", input_format="signatures")
    a = from_text.removed.select(COMPARED).sort_by("id")
    b = from_sigs.removed.select(COMPARED).sort_by("id")
    assert a.num_rows == 8 and a.equals(b)
    assert from_sigs.stats["params"]["verify"] == "estimate"
    assert "no text" in from_sigs.summary() and "verified by the signature estimate" in from_sigs.summary()
    assert from_sigs.stats["counts"]["empty_documents"] == 1
    assert pq.read_table(d / "from_sigs" / "kept").num_rows == from_text.stats["counts"]["kept"]


def test_export_layout_and_same_bytes(exported, tmp_path):
    # mutation guarded: a value parameter left out of VALUE_PARAMS (say "seed"), or a second export
    # of other bytes (the Table built from a dict: column order, or metadata not sorted)
    d, corpus, sig = exported
    again = neardup.signatures(corpus, tmp_path / "again")
    assert [p.rsplit("/", 1)[-1] for p in map(str, again)] == ["part-00000.parquet"]
    assert (tmp_path / "again" / "part-00000.parquet").read_bytes() == (sig / "part-00000.parquet").read_bytes()
    table = pq.read_table(sig / "part-00000.parquet")
    assert table.schema.names == ["id", "signature", "shingles", "length"]
    assert table.schema.field("signature").type == pa.list_(pa.uint32())
    params = json.loads(table.schema.metadata[META_KEY])
    assert set(VALUE_PARAMS) <= set(params) and params["num_perm"] == 128 and params["seed"] == 42
    in_memory = neardup.signatures(corpus)
    assert in_memory.equals(table)
    assert len(in_memory.column("signature")[0]) == 128


def test_other_parameters_and_exact_refused(exported, tmp_path):
    # mutation guarded: export.signature_run without its `verify == "exact"` refusal; check_params's
    # `if diff:` made `if False:`
    d, corpus, sig = exported
    with pytest.raises(ConfigError) as e:
        neardup.dedup(sig, tmp_path / "o", input_format="signatures", num_perm=64)
    assert "num_perm=128 (this run: 64)" in str(e.value) and "\n" not in str(e.value)
    with pytest.raises(ConfigError) as e:
        neardup.dedup(sig, tmp_path / "o", input_format="signatures", ngram=3)
    assert "ngram=5 (this run: 3)" in str(e.value)
    ran = run_in_process("dedup", sig, "-o", tmp_path / "o", "--input-format", "signatures", "--verify", "exact")
    assert ran.returncode == 2 and ran.stderr.count("\n") == 1 and "--verify exact needs the texts" in ran.stderr


def test_files_of_other_seeds_are_refused_naming_whose_value_is_whose(exported, tmp_path):
    # the second file's seed was said against "this run", whose seed is another (42 was the first file's)
    import shutil
    from neardup.errors import InputError
    d, corpus, sig = exported
    folder = tmp_path / "mixed"
    shutil.copytree(sig, folder / "a")
    ran = run_in_process("signatures", corpus, "--output", folder / "b", "--seed", "7")
    assert ran.returncode == 0, ran.stderr
    with pytest.raises(InputError) as e:
        neardup.dedup(folder, tmp_path / "o", input_format="signatures")
    assert "seed=7 (that file's: 42)" in str(e.value) and "this run" not in str(e.value), str(e.value)


@pytest.mark.parametrize("short_rows", ["all", "second file"])
def test_signatures_shorter_than_the_files_num_perm_refused_naming_the_file(exported, tmp_path, short_rows):
    # a file whose metadata says num_perm 128 but whose signatures hold 64 values: a one-line
    # InputError naming the file and row (was numpy's concatenation or the banding's ValueError)
    d, corpus, sig = exported
    table = pq.read_table(sig / "part-00000.parquet")
    short = table.set_column(1, "signature", pa.array([v[:64] for v in table.column("signature").to_pylist()],
                                                      pa.list_(pa.uint32())))
    folder = tmp_path / "sigs"
    folder.mkdir()
    if short_rows == "second file":
        pq.write_table(table, folder / "a.parquet")
    pq.write_table(short.replace_schema_metadata(table.schema.metadata), folder / "b.parquet")
    with pytest.raises(InputError) as e:
        neardup.dedup(folder, tmp_path / "o", input_format="signatures")
    assert "b.parquet: row 0:" in str(e.value) and "128" in str(e.value) and "\n" not in str(e.value)


# --------------------------------------------------------------------------- RedPajama-V2

B, R = 9, 13  # RPv2's bands and rows at 0.8 (datasketch's weighted optimum for k=128)


def _rpv2_shard(path):
    """A minhash.parquet in RedPajama-V2's documented layout (RedPajama-Data app/src/dedupe/minhash.py):
    id, id_int, signature_sim0.8 = a list of B bands, each the bytes of R big-endian uint32; null for a
    document too short to shingle. Planted: doc7 = doc2 (every band), doc11 shares 100 of doc3's 117 values."""
    rng = np.random.default_rng(3)
    n = 30
    sigs = rng.integers(0, 2 ** 32, size=(n, B * R), dtype=np.uint64).astype(np.uint32)
    sigs[7] = sigs[2]
    sigs[11, :100] = sigs[3, :100]
    bands = [[s[i * R:(i + 1) * R].astype(">u4").tobytes() for i in range(B)] for s in sigs]
    bands[5] = None
    pq.write_table(pa.table({"id": [f"doc{i}" for i in range(n)], "id_int": pa.array(np.arange(n, dtype=np.uint64)),
                             "signature_sim0.8": pa.array(bands, pa.list_(pa.binary()))}), path)
    return sigs


def test_rpv2_minhash_deduplicated_without_text(tmp_path):
    # mutation guarded: signatures._rpv2_rows reading the bands as little-endian (view("<u4")), or
    # the bands re-cut by neardup's own bands and rows instead of RPv2's (config.replace without bands/rows)
    shard = tmp_path / "shard.minhash.parquet"
    sigs = _rpv2_shard(shard)
    batches = list(read_source(discover([str(shard)], input_format="rpv2-minhash")[0],
                               text_column="signature_sim0.8"))
    got = np.concatenate([b.signatures for b in batches])
    assert np.array_equal(np.delete(got, 5, 0), np.delete(sigs, 5, 0)) and not got[5].any()
    result = neardup.dedup(shard, tmp_path / "out", input_format="rpv2-minhash")
    removed = {r["id"]: (r["representative"], r["similarity"]) for r in result.removed.to_pylist()}
    assert removed == {"doc7": ("doc2", 1.0), "doc11": ("doc3", pytest.approx(100 / 117))}
    assert (result.stats["params"]["bands"], result.stats["params"]["rows"]) == (B, R)
    assert "RedPajama-V2" in result.summary() and "not neardup's" in result.summary()
    assert result.stats["counts"]["empty_documents"] == 1
    with pytest.raises(ConfigError, match="no column 'signature_sim0.9'.*signature_sim0.8"):
        neardup.dedup(shard, tmp_path / "out2", input_format="rpv2-minhash", threshold=0.9)


def test_records_skipped_while_signing_are_said_not_silent(tmp_path):
    # --on-error skip dropped a broken record without a word ("wrote 1 signature file")
    from neardup import SkippedWarning
    corpus = tmp_path / "a.jsonl"
    corpus.write_text('{"text": "a b c d e f g h"}\n{broken\n{"text": "x y z w v u t s"}\n')
    ran = run_in_process("signatures", corpus, "--output", tmp_path / "sig", "--on-error", "skip")
    assert ran.returncode == 0, ran.stderr
    assert "neardup: note: 1 record skipped (--on-error skip), without a signature; the first: " in ran.stderr
    assert "a.jsonl, row 1: " \
           "broken JSON" in ran.stderr, ran.stderr
    with pytest.warns(SkippedWarning, match="1 record skipped"):
        table = neardup.signatures(str(corpus), on_error="skip")
    assert table.num_rows == 2
