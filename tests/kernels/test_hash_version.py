"""The word hash and its versions (issue 19): version 1 reproduces the hashes of neardup before
versions exactly; version 2 (the default) hashes eight bytes at a time, the same in every path
of the kernel, with the avalanche and the collision rate of a good 64-bit hash."""

import itertools
import random

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from neardup import Config, ConfigError, MinHasher
from neardup.cli import build_parser
from neardup.kernels.minhash import shingle_sets
from neardup.kernels.shingles_python import UNIT_HASHES, _hash_v1_py, _hash_v2_py, shingle_hashes_python

# Computed with the code of ba21e74 (before hash versions and \w+ words): its default, its
# ``delete`` and ``keep`` and its character n-grams. Version 1 with ``keep`` (today's symbol and
# punctuation tokens) gives them on any text; version 1 with the default and ``delete`` gives them
# on text without symbols and _ (the only words that changed).
MIXED = "Hello, World! snake_case x+y=z \u00a9 \U0001f600 \u6771\u4eac caf\u00e9 e\u0301 don't"
PLAIN = "It's a well-known e-mail: don't STOP, caf\u00e9 na\u00efve"
PINNED_V1 = [
    (MIXED, dict(ngram=1, punctuation="keep"), 42, [
        0x17494f3b072f605b, 0x18291144320670a8, 0x2bad6e0b8d732f54, 0x2d680529ea9c7de4, 0x300d7975d1af0951,
        0x370a45b738bbb620, 0x609cbb9e649ee018, 0x71b1688ddd28cea2, 0x7897d96ccb8957f4, 0x843014c8798b60eb,
        0x93281f8aede157f7, 0x9f82d5dd62182a87, 0xadcddb0e312c319c, 0xc4746c4216d157e0, 0xca2fe2ce6a4ff5e7,
        0xd0f6e0aebd87ad10, 0xdbacdd4476a6d147, 0xdbf861a0ab475f84, 0xde48f6eeedc205e6, 0xe7fab2c0c561c205,
        0xffd621ca7643058d]),
    ("> quoted reply | a = b + c; averyveryverylongwordofmorethansixteenbytes", dict(ngram=2, punctuation="keep"), 42, [
        0x373dfbb74068e93, 0x85603f6fcc4791e, 0xc532c737ac62653, 0x4735e8de620ba89b, 0x81bf28f27e1687a4,
        0x9d30237d2f3425f3, 0xa44fd054abfa5054, 0xb6cbabac117849e0, 0xd2f384e7d38ccbe4, 0xe932dbf230942339]),
    ("The quick brown fox jumps over the lazy dog again and again", dict(ngram=5), 42, [
        0xfe5f16b5d4fc856, 0x482add0b3a60e5a8, 0x4b41a5c39aedd13b, 0x5f11f51ad95d2e83, 0xb2ca19dad11c5823,
        0xc5cb6c7c8a27d8ee, 0xcb433597dd086b96, 0xe4c1db08c92a8b10]),
    (PLAIN, dict(ngram=1), 0, [
        0x6fa2154507aad5, 0x28c473832e96b900, 0x363f4bf914c5ee2d, 0x39a9f678124d67cb, 0x42aff7d25dd6ea8a,
        0x5669368d0c224c94, 0x7b6011d3f1e0e92f, 0xa94e331f53a866d5, 0xb36d72dcd1f9df9a, 0xd147f387cef9e31d,
        0xe428d50c38f2fd83, 0xfc8aef46096fccde]),
    (PLAIN, dict(ngram=2, punctuation="delete"), 7, [
        0x19dd1accf66bb5b4, 0x502062e450d9f403, 0x5111cb11e67f0316, 0x5384cdea19291773, 0x6d89f13417e7304d,
        0x8bb48812e28efbfe, 0xe3aff26c7e7525c2]),
    ("Stra\u00dfe ABC d\u00e9j\u00e0 vu, \u0436\u0436 x", dict(ngram=3, char_ngrams=True), 1, [
        0x394d1945869f628, 0x216ee5f5fdab2158, 0x3dfa5eac52fc9e01, 0x404079cc27fcaaec, 0x4743366353daac5a,
        0x55f979dacad61fdc, 0x641eb86244646aa9, 0x6c0b57c71f994f41, 0x8e85f13304dab63c, 0x90959d2d620ffb40,
        0x910d674fe35e971c, 0x9eaeb659377ba418, 0xa2c8687c00bb78aa, 0xabf18f90a3129433, 0xaf9f42d2104ed8f0,
        0xb34f08a2fec6fe77, 0xb5a8d32a38b79e93, 0xbae82af1f1519e82, 0xbd2b7500517f8090, 0xe2eb19ea5fd863f6,
        0xf41d832c484a399d]),
]


@pytest.mark.parametrize("text,opts,seed,expected", PINNED_V1, ids=[f"{i}" for i in range(len(PINNED_V1))])
def test_version_1_reproduces_the_hashes_before_versions(text, opts, seed, expected):
    assert shingle_sets([text], seed=seed, hash_version=1, **opts)[1].tolist() == expected
    assert shingle_hashes_python(text, seed=seed, hash_version=1, **opts) == expected
    # and version 2 hashes differently
    assert set(shingle_sets([text], seed=seed, **opts)[1].tolist()).isdisjoint(expected)


# Version 2 of a few units, pinned: a run's bytes must not change from machine to machine or
# from release to release without a new version.
PINNED_V2 = [(b"a", 0x7c8a4f5375705119), (b"hello", 0xff08184eb0e59f42), (b"abcdefgh", 0x831475feb1ceb4c9),
             (b"abcdefghi", 0x284bbba591029555), (b"snake_case_identifier", 0x9de230ee02648c63),
             ("caf\u00e9".encode(), 0x80a7757c74053ea7)]


def test_version_2_unit_hashes_pinned():
    for unit, h in PINNED_V2:
        assert _hash_v2_py(unit) == h
        # the kernel: the one-word document's unigram is the seeded combination of the unit hash
        assert shingle_sets([unit.decode()], ngram=1, hash_version=2)[1].tolist() == \
            shingle_hashes_python(unit.decode(), ngram=1, hash_version=2)
    assert UNIT_HASHES == {1: _hash_v1_py, 2: _hash_v2_py}


ascii_word = st.text(st.sampled_from("abcxyzABCXYZ0189_"), min_size=1, max_size=40)


@settings(max_examples=150, deadline=None)
@given(word=ascii_word, prefix=st.text(st.sampled_from("ab _-+\u00e9"), max_size=12))
def test_a_token_hashes_the_same_on_every_path(word, prefix):
    """The eight-bytes-at-a-time ASCII path, the general path (non-ASCII text, delete, keep) and
    the plain twin give one hash for the same bytes, wherever the token lies (at the end of the
    buffer too, where eight bytes cannot be loaded at once)."""
    lower = word.lower()
    opts = dict(ngram=1, seed=3)
    alone = shingle_sets([word], **opts)[1].tolist()                      # ASCII: eight at a time
    assert alone == shingle_hashes_python(lower, **opts)
    assert alone == shingle_hashes_python(lower, normalize_unicode=False, lowercase=False, **opts)
    for variant in (dict(), dict(punctuation="delete"), dict(punctuation="keep")):
        # the word at the end of a text that goes through the general path
        got = set(shingle_sets([prefix + " " + word], **variant, **opts)[1].tolist())
        if variant.get("punctuation") != "keep" or "_" not in word:
            assert set(alone) <= got, variant
    # a word in a batch of others, at every position of the data buffer
    texts = [prefix, word, prefix + " " + word + " x", word]
    offsets, values = shingle_sets(texts, **opts)
    for i, t in enumerate(texts):
        assert values[offsets[i]:offsets[i + 1]].tolist() == shingle_hashes_python(t, **opts)


def _bits(x: int) -> int:
    return bin(x).count("1")


@pytest.mark.parametrize("version", [2])
def test_avalanche(version):
    """Flipping one input bit flips each output bit with probability ~1/2: over 300 random units
    of 1 to 24 bytes and every bit of each, the mean number of flipped bits is 32 +- 0.5 and
    every output bit flips in 50% +- 3% of the trials."""
    h = UNIT_HASHES[version]
    rng = random.Random(5)
    flips = np.zeros(64)
    trials = 0
    total = 0
    for _ in range(300):
        unit = bytes(rng.randrange(256) for _ in range(rng.randint(1, 24)))
        base = h(unit)
        for i in range(len(unit) * 8):
            flipped = bytearray(unit)
            flipped[i // 8] ^= 1 << (i % 8)
            d = base ^ h(bytes(flipped))
            total += _bits(d)
            flips += [(d >> k) & 1 for k in range(64)]
            trials += 1
    assert abs(total / trials - 32) < 0.5
    assert np.all(np.abs(flips / trials - 0.5) < 0.03)


def _distinct_tokens():
    alphabet = "abcdefghijklmnopqrstuvwxyz0123456789_"
    short = ["".join(p) for n in range(1, 5) for p in itertools.product(alphabet, repeat=n)]
    numbered = [f"zz_{i}" for i in range(10, 600_010)]              # 5 to 9 bytes
    long = [f"a_common_prefix_{i}" for i in range(400_000)]          # 17 to 22 bytes: words differing late
    return short + numbered + long


@pytest.mark.slow  # 2.9M tokens hashed and counted: 9-13 s, the inner loop's longest test
def test_no_collisions_among_millions_of_short_tokens():
    """2.9M distinct tokens (every token of up to 4 characters of [a-z0-9_], numbered ones, long
    ones that share their first 16 bytes): no two share a 64-bit hash, and their low and high
    32-bit halves (what the signatures and the fingerprints use) collide as often as random
    values would."""
    tokens = _distinct_tokens()
    n = len(tokens)
    assert n > 2_800_000 and len(set(tokens)) == n
    offsets, values = shingle_sets([" ".join(tokens)], ngram=1)
    assert len(values) == n                       # a unigram's hash is a bijection of its unit's
    expected = n * (n - 1) / 2 / 2 ** 32          # pairs sharing a 32-bit half, for random values
    for half in (values & np.uint64(0xFFFFFFFF), values >> np.uint64(32)):
        pairs = n - len(np.unique(half))
        assert abs(pairs - expected) < 5 * np.sqrt(expected), (pairs, expected)


def test_hash_version_option():
    assert Config().hash_version == 2 and MinHasher().shingling.hash_version == 2
    assert Config(hash_version=1).shingling.hash_version == 1
    with pytest.raises(ConfigError, match="hash_version must be between 1 and 2, got 3"):
        Config(hash_version=3)
    parser = build_parser()
    assert parser.parse_args(["dedup", "x", "-o", "o"]).hash_version == 2
    assert parser.parse_args(["dedup", "x", "-o", "o", "--hash-version", "1"]).hash_version == 1
    assert "hash_version" in Config().identity() and "hash_version" in Config().recorded()
