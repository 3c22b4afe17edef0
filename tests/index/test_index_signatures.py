"""``neardup index add --input-format signatures`` (issue 31): an index made from the signatures
of ``neardup signatures``, without the texts; an index of other parameters, or one that keeps
shingle fingerprints, refuses them in one line; RedPajama-V2's signatures are refused."""

import pytest

import neardup
from neardup.errors import ConfigError
from neardup.index import Index

from helpers import run_in_process, write_jsonl

TEXTS = [f"alpha beta gamma delta {i} epsilon zeta eta theta iota kappa lambda {i * 7}" for i in range(20)]


@pytest.fixture(scope="module")
def signed(tmp_path_factory):
    d = tmp_path_factory.mktemp("isig")
    corpus = write_jsonl(d / "c.jsonl", TEXTS, [f"t{i}" for i in range(len(TEXTS))])
    neardup.signatures(corpus, d / "sig")
    return d, corpus, d / "sig"


def test_index_made_from_signatures_matches_the_texts(signed, tmp_path):
    # mutation guarded: signature_inputs.add_signature_files making the keys with another seed
    # (band_keys(..., cfg.seed + 1)): no text of the corpus would match its own signature
    d, corpus, sig = signed
    ran = run_in_process("index", "add", tmp_path / "idx", sig, "--input-format", "signatures")
    assert ran.returncode == 0, ran.stderr
    assert "verified by the signature estimate" in ran.stderr
    index = Index(tmp_path / "idx")
    assert index.store == "estimate" and index.stats()["documents"] == len(TEXTS)
    result = neardup.dedup(corpus, tmp_path / "out", against=str(tmp_path / "idx"), verify="estimate")
    assert result.stats["counts"]["removed_against_index"] == len(TEXTS)


def test_index_of_other_parameters_or_fingerprints_refuses_signatures(signed, tmp_path):
    # mutation guarded: add_signature_files without its `index.store == "exact"` refusal (the add
    # fails deep in add_arrays, naming an argument of the API); wanted built without the files'
    # parameters ({**options} only: the index's own k taken, the signatures cut into its bands)
    d, corpus, sig = signed
    other = tmp_path / "other"
    Index(other, num_perm=64, verify="estimate").add(TEXTS[:3], name="x")
    ran = run_in_process("index", "add", other, sig, "--input-format", "signatures")
    assert ran.returncode == 2 and ran.stderr.count("\n") == 1 and "num_perm 64 (this run: 128)" in ran.stderr
    exact = tmp_path / "exact"
    Index(exact).add(TEXTS[:3], name="x")
    with pytest.raises(ConfigError, match="keeps shingle fingerprints .* signatures carry no text"):
        neardup.api.add_files(exact, [str(sig)], input_format="signatures")
    with pytest.raises(ConfigError, match="RedPajama-V2 signatures .* cannot be added to an index"):
        neardup.api.add_files(tmp_path / "new", [str(sig)], input_format="rpv2-minhash")
