"""The tokenizer and shingle hashes: compiled kernels against the plain Python twin, and what a word is."""

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from neardup.kernels.minhash import MinHasher
from neardup.kernels.minhash import shingle_counts, shingle_sets
from neardup.kernels.shingles import (CONNECT, MARK, NOTEXT, PUNCT, SPACE, SYMBOL, WORD, TextSpans, char_classes,
                                      to_arrow_strings)
from neardup.kernels.shingles_python import shingle_hashes_python, shingles_python, tokens_python

# ----------------------------------------------------------------------------- strategies

# Characters that stress every branch of the tokenizer: every class of char_classes(), NFKC and
# case-mapping expansions, scripts without spaces, marks, emoji with modifiers, zero-width chars.
SPECIAL = [
    " ", "\t", "\n", "\r", "\x0b", "\x00", "\x1f", "\x85", "\u00a0", "\u2003", "\u3000", "\u2028",
    "\u200b",                     # zero-width space (a separator)
    "\u200c", "\u200d", "\u00ad", "\ufeff", "\U000e0041",  # Cf: ZWNJ, ZWJ, soft hyphen, BOM, tag
    "\u0301", "\u0308", "\u20dd", "\ufe0f",                # combining marks, enclosing mark, VS16
    "\u0e01", "\u0e34", "\u0e49", "\u0e32", "\u0e44",       # Thai consonant, vowel marks, vowels
    "\u6771", "\u4eac", "\u30bf", "\u30fc", "\u3042", "\ud55c", "\u3005", "\U00020000",  # CJK, kana, hangul
    "\u0915", "\u093f", "\u0627", "\u0644", "\u05d0",      # Devanagari with vowel sign, Arabic, Hebrew
    "\U0001f600", "\U0001f44d", "\U0001f3fd", "\u2764", "\U0001f1eb", "\U0001f1f7",  # emoji, skin tone, flags
    "\ufb01", "\uff21", "\uff41", "\u2162", "\u00bd", "\ufdfa", "\u01c5", "\u00df", "\u0130", "\u03a3",  # NFKC/case
    ".", ",", "'", "\u2019", "!", "?", "-", "\u2014", "_", "\u00bf", "\u00ab", "\u00bb", "(", ")", "\u3002",
    "$", "\u20ac", "+", "=", "^", "`", "~", "\u00a9",
    "a", "b", "c", "A", "B", "Z", "0", "1", "9", "\u00e9", "\u0436", "\ue000", "\U0010fffd",
    "\ufffd", "\u0378", "\U000e0080",   # not text: replacement character, unassigned code points
]

chars = st.one_of(st.sampled_from(SPECIAL), st.characters(codec="utf-8"))
raw_text = st.text(chars, max_size=40)
SEPARATORS = [" ", "  ", "\n", "\t", " , ", ". ", " - ", "\u3000", "", "\u200b"]
word = st.one_of(st.sampled_from(["the", "cat", "Cat", "sat", "on", "mat", "don't", "東京", "😀", "e\u0301"]),
                 st.text(chars, min_size=1, max_size=5))


@st.composite
def wordy_text(draw):
    """Documents made of words with repeats, so that n-grams repeat and shingle sets deduplicate."""
    words = draw(st.lists(word, max_size=14))
    out = []
    for w in words:
        out.append(w)
        out.append(draw(st.sampled_from(SEPARATORS)))
    return "".join(out)


# Pure ASCII documents take the kernel's fast path (no Arrow normalisation, A-Z lower-cased while
# hashing); mixing them with non-ASCII documents in one batch exercises the split and the scatter.
ascii_text = st.text(st.characters(max_codepoint=127), max_size=40)
doc = st.one_of(raw_text, wordy_text(), ascii_text, st.sampled_from(["", " ", "\n\t", "...", "!?", "\u200b\u200d"]))
docs = st.lists(doc, min_size=0, max_size=6)
options = st.fixed_dictionaries({
    "ngram": st.sampled_from([1, 2, 3, 5]),
    "char_ngrams": st.booleans(),
    "normalize_unicode": st.booleans(),
    "lowercase": st.booleans(),
    "punctuation": st.sampled_from(["split", "delete", "keep"]),
    "collapse_whitespace": st.booleans(),
})
seeds = st.sampled_from([0, 1, 42, 2**40 + 3])

PROPS = settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def csr_rows(offsets, values):
    return [values[offsets[i]:offsets[i + 1]].tolist() for i in range(len(offsets) - 1)]


def twin_sets(texts, seed, **opts):
    return [shingle_hashes_python("" if t is None else t, seed=seed, **opts) for t in texts]


# ----------------------------------------------------------------------------- kernel == twin

@PROPS
@given(texts=docs, opts=options, seed=seeds)
def test_shingle_sets_equal_python_twin(texts, opts, seed):
    mh = MinHasher(num_perm=8, seed=seed, **opts)
    offsets, values = mh.shingle_sets(texts)
    assert offsets.dtype == np.int64 and values.dtype == np.uint64
    assert offsets[0] == 0 and len(offsets) == len(texts) + 1
    assert csr_rows(offsets, values) == twin_sets(texts, seed, **opts)
    # the module-level function is the same thing
    o2, v2 = shingle_sets(texts, seed=seed, **opts)
    assert np.array_equal(o2, offsets) and np.array_equal(v2, values)


@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(texts=docs, opts=options)
def test_shingle_counts_equal_twin_and_signature_counts(texts, opts):
    counts = shingle_counts(texts, **opts)
    expected = [len(shingles_python(t, **opts)) for t in texts]
    assert counts.tolist() == expected
    _, sig_counts = MinHasher(num_perm=4, **opts).signatures_and_counts(texts)
    assert sig_counts.tolist() == expected


@PROPS
@given(text=doc, opts=options)
def test_no_empty_tokens_ever(text, opts):
    opts = dict(opts)
    ngram = opts.pop("ngram")
    table = char_classes()
    units = tokens_python(text, **opts)
    assert all(len(u) > 0 for u in units)
    if opts["char_ngrams"]:
        assert all(len(u) == 1 for u in units)
        if opts["collapse_whitespace"]:
            # one space between non-space units, never leading, trailing or doubled
            assert all(u == " " or table[ord(u)] != SPACE for u in units)
            assert not units or (units[0] != " " and units[-1] != " ")
            assert all(not (x == " " and y == " ") for x, y in zip(units, units[1:]))
    else:
        # a word never contains white space nor a non-text code point; but under keep no
        # punctuation and no symbol
        assert all(table[ord(ch)] not in (SPACE, NOTEXT) for u in units for ch in u)
        if opts["punctuation"] != "keep":
            assert all(table[ord(ch)] not in (PUNCT, SYMBOL) for u in units for ch in u)
        # a word of letters, digits, _ and marks never holds anything else, and a unit of more
        # than one code point is such a word
        assert all(table[ord(ch)] in (WORD, MARK) or table[ord(ch)] == CONNECT and opts["punctuation"] != "keep"
                   for u in units if len(u) > 1 for ch in u[1:])
    shingles = shingles_python(text, ngram=ngram, **opts)
    assert all(len(s) == min(ngram, len(units)) for s in shingles)


# ----------------------------------------------------------------------------- input types

TEXTS = ["Hello, World! The quick brown fox jumps over the lazy dog.", None, "",
         "東京タワーは東京の観光名所です。", "café CAFÉ cafe\u0301 ﬁne ＡＢＣ", "  \t  ", "I ❤️ 🍕 pizza, 🍕 pizza!",
         "กินข้าว แล้ว ไป", "one two three four five six seven", "...!!!", "don't stop — believe"]


def reference(texts, opts, seed=42):
    return twin_sets(texts, seed, **opts)


INPUT_OPTS = [dict(ngram=2), dict(ngram=3, char_ngrams=True),
              dict(ngram=2, normalize_unicode=False, lowercase=False),
              dict(ngram=3, char_ngrams=True, normalize_unicode=False, lowercase=False, collapse_whitespace=False)]


def _inputs():
    clean = [t for t in TEXTS if t is not None]
    big = pa.array(["prefix doc", "another"] + clean + ["suffix"], type=pa.large_string())
    small = pa.array(["prefix doc", "another"] + clean + ["suffix"], type=pa.string())
    yield "list", TEXTS, TEXTS
    yield "tuple", tuple(TEXTS), TEXTS
    yield "numpy object", np.array(TEXTS, dtype=object), TEXTS
    yield "pa.string", pa.array(TEXTS, type=pa.string()), TEXTS
    yield "pa.large_string", pa.array(TEXTS, type=pa.large_string()), TEXTS
    yield "pa.string_view", pa.array(TEXTS, type=pa.string_view()), TEXTS
    yield "dictionary", pa.array(TEXTS).dictionary_encode(), TEXTS
    yield "chunked", pa.chunked_array([pa.array(TEXTS[:4]), pa.array(TEXTS[4:])]), TEXTS
    yield "chunked of one sliced chunk", pa.chunked_array([big.slice(2, len(clean))]), clean
    yield "chunked, empty", pa.chunked_array([], type=pa.string()), []
    yield "sliced large_string", big.slice(2, len(clean)), clean
    yield "sliced string", small.slice(2, len(clean)), clean
    yield "sliced with nulls", pa.array(["x y z"] + TEXTS, type=pa.large_string()).slice(1), TEXTS
    yield "pandas object", pd.Series(TEXTS), TEXTS
    yield "pandas string", pd.Series(TEXTS, dtype="string"), TEXTS
    yield "pandas sliced", pd.Series(["skip me"] + TEXTS).iloc[1:], TEXTS
    yield "empty list", [], []


@pytest.mark.parametrize("name,texts,expected_texts", list(_inputs()), ids=[n for n, *_ in _inputs()])
@pytest.mark.parametrize("opts", INPUT_OPTS, ids=["word", "char", "word-raw", "char-raw"])
def test_input_types(name, texts, expected_texts, opts):
    mh = MinHasher(num_perm=16, **opts)
    offsets, values = mh.shingle_sets(texts)
    assert csr_rows(offsets, values) == reference(expected_texts, opts)
    sigs, counts = mh.signatures_and_counts(texts)
    assert sigs.shape == (len(expected_texts), 16)
    assert counts.tolist() == [len(shingles_python("" if t is None else t, **opts)) for t in expected_texts]


def test_sliced_array_offset_is_honoured_without_normalisation():
    # Without NFKC and lower-casing no Arrow compute runs, so the kernel sees the slice itself.
    base = pa.array(["aaa bbb ccc", "one two three", "x y", "four five six"], type=pa.large_string())
    sl = base.slice(1, 2)
    assert sl.offset == 1
    assert to_arrow_strings(sl).offset == 1
    opts = dict(ngram=2, normalize_unicode=False, lowercase=False)
    offsets, values = shingle_sets(sl, **opts)
    assert csr_rows(offsets, values) == reference(["one two three", "x y"], opts)


@pytest.mark.parametrize("opts", INPUT_OPTS[:2] + [dict(ngram=1, lowercase=False), dict(ngram=2, normalize_unicode=False)])
def test_ascii_fast_path_and_mixed_batches(opts):
    ascii_docs = ["HELLO World, the END.", "MiXeD CaSe ascii ONLY", "", "x", "\x00 NUL and \x7f DEL"]
    other = ["ÜBER Straße", "ＨＥＬＬＯ World", "東京 TOWER", "\ufb01NE print"]
    for texts in (ascii_docs, other, ascii_docs + other, [d for pair in zip(other, ascii_docs) for d in pair]):
        offsets, values = shingle_sets(texts, **opts)
        assert csr_rows(offsets, values) == reference(texts, opts)
        sigs, counts = MinHasher(num_perm=8, **opts).signatures_and_counts(texts)
        assert counts.tolist() == [len(shingles_python(t, **opts)) for t in texts]
    # a sliced, pure-ASCII array goes to the kernel without a copy: the slice offset must be honoured
    big = pa.array(["SKIP me"] + ascii_docs + ["AND me"], type=pa.large_string())
    sl = big.slice(1, len(ascii_docs))
    offsets, values = shingle_sets(sl, **opts)
    assert csr_rows(offsets, values) == reference(ascii_docs, opts)
    # mixed and sliced
    big = pa.array(["SKIP me"] + ascii_docs + other + ["AND me"], type=pa.large_string())
    offsets, values = shingle_sets(big.slice(1, len(ascii_docs) + len(other)), **opts)
    assert csr_rows(offsets, values) == reference(ascii_docs + other, opts)


def test_ascii_case_folding_matches_unicode_lowercase():
    # "HELLO" (fast path) and "HELLO é" (Arrow path) must hash HELLO the same way
    a = set(shingle_sets(["HELLO"], ngram=1)[1].tolist())
    b = set(shingle_sets(["HELLO \u00e9"], ngram=1)[1].tolist())
    assert a < b


def test_nulls_are_empty_documents():
    mh = MinHasher(num_perm=8)
    sigs, counts = mh.signatures_and_counts(pa.array([None, "a b c d e f", None]))
    assert counts.tolist() == [0, 2, 0]
    assert (sigs[0] == 0xFFFFFFFF).all() and (sigs[2] == 0xFFFFFFFF).all()


@pytest.mark.parametrize("bad", [0, -1])
def test_shingle_counts_rejects_bad_ngram(bad):
    with pytest.raises(ValueError):
        shingle_counts(["abc def"], ngram=bad, char_ngrams=True)


def test_bad_inputs_raise():
    with pytest.raises(TypeError):
        shingle_sets("a single string is not a corpus")
    with pytest.raises(TypeError):
        shingle_sets(pa.array([1, 2, 3]))
    for bad in (0, -1, 2.5, True):
        with pytest.raises(ValueError):
            shingle_sets(["a b"], ngram=bad)


# ----------------------------------------------------------------------------- what a word is

def kernel_units_are(text, expected, **opts):
    """The kernel's unigram set of ``text`` is exactly the hashes of the ``expected`` units.

    Each expected unit is hashed on its own, as a one-unit document with every transformation off,
    so the check ties the compiled tokenizer (not only the twin) to the spelled-out tokens. White
    space units of character n-grams cannot be a one-unit word document; they are counted instead.
    """
    word_opts = dict(normalize_unicode=False, lowercase=False)
    table = char_classes()
    want = set()
    spaces = set()
    for unit in expected:
        if len(unit) == 1 and table[ord(unit)] == SPACE:
            spaces.add(unit)
            continue
        # a non-text character is a unit of character n-grams only, hashed as a word would be
        # (a word with _ is one token under split, any other unit under keep)
        unit_opts = dict(word_opts, char_ngrams=len(unit) == 1 and table[ord(unit)] == NOTEXT,
                         punctuation="split" if any(table[ord(ch)] == CONNECT for ch in unit) else "keep")
        assert tokens_python(unit, **unit_opts) == [unit]
        want.update(shingle_hashes_python(unit, ngram=1, **unit_opts))
    offsets, values = shingle_sets([text], ngram=1, **opts)
    got = set(values.tolist())
    assert want <= got and len(got - want) == len(spaces)
    assert set(shingle_hashes_python(text, ngram=1, **opts)) == got


@pytest.mark.parametrize("text,opts,expected", [
    ("Hello, World!", {}, ["hello", "world"]),
    ("Hello, World!", dict(punctuation="keep"), ["hello", ",", "world", "!"]),
    ("Hello, World!", dict(lowercase=False), ["Hello", "World"]),
    # punctuation ends a word, as white space does (the default, "split")
    ("don't", {}, ["don", "t"]),
    ("don\u2019t stop", {}, ["don", "t", "stop"]),
    ("well-known e-mail", {}, ["well", "known", "e", "mail"]),
    ("foo.bar(x) end.Start", {}, ["foo", "bar", "x", "end", "start"]),
    ("snake_case_name", {}, ["snake_case_name"]),                     # _ (Pc) is a word character, as in \w
    ("snake_case_name", dict(punctuation="delete"), ["snake_case_name"]),
    ("snake_case_name", dict(punctuation="keep"), ["snake", "_", "case", "_", "name"]),
    ("> quoted\n>> reply | x", {}, ["quoted", "reply", "x"]),          # symbols end words and are no tokens
    ("x+y=z don't", dict(punctuation="delete"), ["x", "y", "z", "dont"]),  # delete: symbols still separate
    ("x+y=z", dict(punctuation="keep"), ["x", "+", "y", "=", "z"]),
    ("3.14 1,000", {}, ["3", "14", "1", "000"]),
    ("«quoted»—dash…", {}, ["quoted", "dash"]),
    # delete: the old default, punctuation deleted inside the word
    ("don't", dict(punctuation="delete"), ["dont"]),
    ("don\u2019t stop", dict(punctuation="delete"), ["dont", "stop"]),
    ("well-known e-mail", dict(punctuation="delete"), ["wellknown", "email"]),
    # keep: each mark a token
    ("don't", dict(punctuation="keep"), ["don", "'", "t"]),
    ("東京。大阪", dict(punctuation="keep"), ["東", "京", "。", "大", "阪"]),
    ("東京。大阪", {}, ["東", "京", "大", "阪"]),
    # not text: the replacement character, private use, unassigned code points separate words
    ("mojibake\ufffd\ufffdtext \ufffd\ufffd\ufffd", {}, ["mojibake", "text"]),
    ("\ufffd\ufffd \ufffd", {}, []),
    ("priv\ue000ate \U0010fffd x", {}, ["priv", "ate", "x"]),
    ("un\u0378assigned", {}, ["un", "assigned"]),                    # U+0378 is unassigned
    ("a\ufffdb", dict(punctuation="keep"), ["a", "b"]),
    ("a\ufffdb", dict(char_ngrams=True), ["a", "\ufffd", "b"]),        # characters: unchanged
    ("東京タワー", {}, ["東", "京", "タ", "ワ", "ー"]),
    ("我爱北京", {}, ["我", "爱", "北", "京"]),
    ("abc東京def", {}, ["abc", "東", "京", "def"]),
    ("กินข้าว", {}, ["ก\u0e34", "น", "ข\u0e49", "า", "ว"]),           # vowel/tone marks stay attached
    ("नमस्ते दुनिया", {}, ["नमस्ते", "दुनिया"]),                       # Devanagari vowel signs stay inside
    ("e\u0301te", dict(normalize_unicode=False), ["e\u0301te"]),       # combining acute stays in its word
    ("e\u0301te", {}, ["\u00e9te"]),                                  # NFKC composes it
    ("I ❤ 🍕 pizza", {}, ["i", "pizza"]),                             # symbols and emoji are no tokens
    ("I ❤ 🍕 pizza", dict(punctuation="keep"), ["i", "❤", "🍕", "pizza"]),  # but under keep
    ("great👍👍", {}, ["great"]),
    ("I ❤\ufe0f pizza", {}, ["i", "pizza"]),                          # a mark on no token goes with it
    ("❤\ufe0f", dict(punctuation="keep"), ["❤\ufe0f"]),               # the variation selector is a mark
    ("\u00b4a b\u00a8", {}, ["a", "b"]),                              # NFKC: space + combining mark
    ("\u00b4a", dict(punctuation="keep"), ["\u0301a"]),                # keep: a mark may begin a word
    ("price: 5$ + 3€", {}, ["price", "5", "3"]),
    ("price: 5$ + 3€", dict(punctuation="keep"), ["price", ":", "5", "$", "+", "3", "€"]),
    ("\ufb01ne", {}, ["fine"]),                                       # NFKC ligature
    ("\ufb01ne", dict(normalize_unicode=False), ["\ufb01ne"]),
    ("ＨＥＬＬＯ ｗｏｒｌｄ", {}, ["hello", "world"]),                   # full-width letters
    ("ＨＥＬＬＯ", dict(normalize_unicode=False), ["ｈｅｌｌｏ"]),
    ("ＨＥＬＬＯ", dict(normalize_unicode=False, lowercase=False), ["ＨＥＬＬＯ"]),
    ("ΣΊΣΥΦΟΣ", {}, ["σίσυφοσ"]),
    ("co\u00adop", {}, ["coop"]),                                      # soft hyphen deleted, no split
    ("zero\u200dwidth", {}, ["zerowidth"]),                            # ZWJ deleted, no split
    ("zero\u200bwidth", {}, ["zero", "width"]),                        # zero-width space separates
    ("tab\tnew\nline\u00a0nbsp\u3000ideo", {}, ["tab", "new", "line", "nbsp", "ideo"]),
    ("  a  b\t\nc  ", dict(char_ngrams=True), ["a", " ", "b", " ", "c"]),
    ("a , b!", dict(char_ngrams=True), ["a", " ", "b"]),                # characters: deleted under split
    ("a+b ❤\ufe0f_c", dict(char_ngrams=True), ["a", "b", " ", "_", "c"]),  # symbols too, and their marks
    ("a+b ❤\ufe0f_c", dict(char_ngrams=True, punctuation="keep"), ["a", "+", "b", " ", "❤", "\ufe0f", "_", "c"]),
    ("a-b", dict(char_ngrams=True, punctuation="delete"), ["a", "b"]),
    ("a , b!", dict(char_ngrams=True, punctuation="keep"), ["a", " ", ",", " ", "b", "!"]),
    (" a\tb ", dict(char_ngrams=True, collapse_whitespace=False), [" ", "a", "\t", "b", " "]),
])
def test_what_a_unit_is(text, opts, expected):
    assert tokens_python(text, **opts) == expected
    kernel_units_are(text, expected, **opts)


def test_char_ngrams_collapse_and_strip_whitespace():
    opts = dict(char_ngrams=True, ngram=3)
    a = shingle_sets(["  the   cat\n\tsat  "], **opts)[1]
    b = shingle_sets(["the cat sat"], **opts)[1]
    assert np.array_equal(a, b)
    raw = shingle_sets(["  the   cat\n\tsat  "], collapse_whitespace=False, **opts)[1]
    assert not np.array_equal(raw, b)
    assert tokens_python("the cat", char_ngrams=True) == list("the cat")


def test_word_ngrams_are_ordered_and_not_joined_strings():
    opts = dict(ngram=2)
    ab = set(shingle_sets(["alpha beta"], **opts)[1].tolist())
    ba = set(shingle_sets(["beta alpha"], **opts)[1].tolist())
    assert ab.isdisjoint(ba)
    # "ab c" and "a bc" join to the same string but are different bigrams
    assert shingle_sets(["ab c"], **opts)[1].tolist() != shingle_sets(["a bc"], **opts)[1].tolist()


def test_short_document_is_one_shingle_of_all_units():
    assert shingles_python("a b c", ngram=5) == [("a", "b", "c")]
    assert shingles_python("a b c d e", ngram=5) == [("a", "b", "c", "d", "e")]
    assert shingles_python("a b c d e f", ngram=5) == [("a", "b", "c", "d", "e"), ("b", "c", "d", "e", "f")]
    offsets, values = shingle_sets(["a b c", "a b c d", "a b"], ngram=5)
    assert np.diff(offsets).tolist() == [1, 1, 1]
    assert len(set(values.tolist())) == 3  # a prefix is a different shingle
    assert shingle_counts(["a b c"], ngram=5).tolist() == [1]
    assert shingles_python("ab", ngram=5, char_ngrams=True) == [("a", "b")]


def test_repeated_shingles_are_one_set_element():
    offsets, values = shingle_sets(["a a a a a a a a"], ngram=2)
    assert np.diff(offsets).tolist() == [1]
    assert shingle_counts(["a a a a a a a a"], ngram=2).tolist() == [7]


@pytest.mark.parametrize("text", ["", " ", "\n\t\r ", "\u3000\u00a0", "...", "!?!", "«»—", "\u200b\u200d\u00ad",
                                  "  , . ; :  "])
@pytest.mark.parametrize("char_ngrams", [False, True])
def test_empty_documents_have_no_shingles(text, char_ngrams):
    opts = dict(char_ngrams=char_ngrams)
    assert tokens_python(text, **opts) == []
    assert shingle_hashes_python(text, **opts) == []
    offsets, _ = shingle_sets([text], **opts)
    assert offsets.tolist() == [0, 0]
    sigs, counts = MinHasher(num_perm=8, **opts).signatures_and_counts([text])
    assert counts.tolist() == [0] and (sigs == 0xFFFFFFFF).all()


def test_punctuation_only_document_has_tokens_when_punctuation_is_kept():
    assert tokens_python("...", punctuation="keep") == [".", ".", "."]
    assert tokens_python("...", punctuation="split") == []


def test_punctuation_modes_are_checked():
    with pytest.raises(ValueError, match="punctuation must be one of split, delete, keep"):
        tokens_python("a b", punctuation="remove")
    with pytest.raises(ValueError, match="punctuation must be one of split, delete, keep"):
        MinHasher(punctuation="remove")
    assert MinHasher().shingling.punctuation == "split"


def test_hyphen_and_dot_variants_are_the_same_words():
    """The issue's pairs: under split, a re-hyphenated or re-spaced copy has the same shingles."""
    pairs = [("a well-known e-mail service", "a well known e mail service"),
             ("call foo.bar(x) now", "call foo bar x now"),
             ("the end.Start again", "the end. Start again"),
             ("it's what we don't do", "it\u2019s what we don\u2019t do")]
    for x, y in pairs:
        assert shingle_sets([x], ngram=2)[1].tolist() == shingle_sets([y], ngram=2)[1].tolist(), (x, y)
        assert (shingle_sets([x], ngram=2, punctuation="delete")[1].tolist()
                != shingle_sets([y], ngram=2, punctuation="delete")[1].tolist()) or "\u2019" in y


def test_punctuation_and_spacing_do_not_change_shingles():
    """Regression of a peer bug: empty tokens between punctuation dragged a 0.977 pair down to 0.28."""
    from neardup.kernels.verify import exact_jaccard
    rng = np.random.default_rng(3)
    vocab = [f"w{i}" for i in range(5000)]
    words = list(rng.choice(vocab, size=300))
    edited = list(words)
    edited[150] = "changed"
    seps = [" ", " , ", " - ", "  ...  ", " ; ", "\n\n", " — ", " (", ") "]
    noisy = "".join(w + seps[i % len(seps)] for i, w in enumerate(edited))
    clean = " ".join(words)
    assert tokens_python(noisy) == [w.lower() for w in edited]
    offsets, hashes = shingle_sets([clean, noisy], ngram=5)
    got = exact_jaccard(offsets, hashes, np.array([0]), np.array([1]))[0]

    def grams(ws):
        return set(zip(*[ws[i:] for i in range(5)]))
    a, b = grams(words), grams(edited)
    assert got == pytest.approx(len(a & b) / len(a | b), abs=1e-12)
    assert got > 0.96


# The word tokenizer's branch-free ASCII path (words, white space, deleted punctuation) and its
# fall-back to the general path (symbols, kept punctuation, control characters, non-ASCII) must
# give exactly the twin's shingles, whichever path a document takes and wherever it switches.
ascii_text = st.text(alphabet=st.sampled_from(list("abcXYZ019 \t\n.,;'!?-_()$+<=>|~^`") + ["é", "中"]),
                     max_size=60)


@settings(max_examples=150, deadline=None)
@given(texts=st.lists(ascii_text, min_size=1, max_size=6), punct=st.sampled_from(["split", "delete", "keep"]),
       lower=st.booleans(), ngram=st.sampled_from([1, 2, 5]))
def test_ascii_fast_path_equals_twin(texts, punct, lower, ngram):
    opts = dict(ngram=ngram, punctuation=punct, lowercase=lower, normalize_unicode=lower)
    offsets, hashes = shingle_sets(texts, seed=7, **opts)
    for i, t in enumerate(texts):
        assert hashes[offsets[i]:offsets[i + 1]].tolist() == shingle_hashes_python(t, seed=7, **opts), t


@pytest.mark.parametrize("ngram", [1, 5])
def test_ascii_words_across_64_byte_steps_and_the_buffers_end_equal_twin(ngram):
    """The ASCII word path classes 64 bytes at a time while 64 bytes of the buffer are left, and
    eight at a time in its last bytes: documents of every length up to ~300 bytes, one after
    another in one buffer (a word running over a step's edge, a document's end inside a step with
    the next document's bytes after it, the last ones within the buffer's last 64 bytes), give
    exactly the twin's shingles."""
    rng = np.random.default_rng(11)
    alphabet = list("abcdefghijXYZ0189_") * 3 + list(" \t\n.,-'!")
    texts = ["".join(rng.choice(alphabet, size=int(n))) for n in list(range(0, 140)) + list(rng.integers(140, 300, 60))]
    texts += ["a" * 63, "b" * 64, "c" * 65, "_" * 130, "x " * 40, "hello_world_123 and more " * 5]
    data = np.frombuffer("".join(texts).encode(), dtype=np.uint8)  # no byte after the last document
    ends = np.cumsum([len(t) for t in texts])
    spans = TextSpans(data, ends - [len(t) for t in texts], ends)
    for given in (texts, spans):  # (an Arrow array's buffer may have padding after its last document)
        offsets, hashes = shingle_sets(given, seed=3, ngram=ngram)
        for i, t in enumerate(texts):
            assert hashes[offsets[i]:offsets[i + 1]].tolist() == shingle_hashes_python(t, seed=3, ngram=ngram), (i, t)
