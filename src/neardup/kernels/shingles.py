"""Normalisation, tokens and shingle hashes, straight from the UTF-8 bytes of Arrow string arrays.

Pipeline for one document
-------------------------
1. Unicode NFKC and lower-casing (switchable) run in Arrow compute (``utf8_normalize``,
   ``utf8_lower``) over the whole batch.
2. A compiled tokenizer walks the UTF-8 bytes once and classifies every code point by its
   Unicode general category (:mod:`.charclasses`, built once from :mod:`unicodedata`):

   ============  ========================================================================
   class         what happens
   ============  ========================================================================
   space         Z* and control characters: end the current token
   word          letters L*, digits N*: extend the current token
   connect       connector punctuation Pc (``_``): a word character, so that a word is the
                 peers' ``\\w+`` (``snake_case`` is one word); under ``keep`` a token of its
                 own, as before words were ``\\w+``
   mark          combining marks M*: extend the current token (so accents and the vowel
                 signs of Indic and Thai scripts stay inside their word); a mark on no token
                 (after white space, a symbol, punctuation) is deleted with what it sits on,
                 but under ``keep``, where it begins a word
   single        ideographs and syllabaries of scripts written without spaces (Han,
                 Hiragana, Katakana, Thai, Lao, Khmer, Myanmar, Tibetan, Yi): each code
                 point (with its marks) is one token, i.e. a *word is one character* there
   symbol        S* (``>``, ``=``, ``+``, ``|``, ``©``, currency, emoji): end the current token
                 and are no token under ``split`` and ``delete``; under ``keep`` each is a
                 token of its own
   punctuation   P* but Pc, by ``punctuation``: ``split`` (the default) ends the current
                 token the way white space does (``well-known`` -> ``well known``, ``don't``
                 -> ``don t``); ``delete`` deletes it without splitting (``don't`` ->
                 ``dont``); ``keep`` makes each mark a token of its own
   not text      U+FFFD (the replacement character of a failed decode), private use Co,
                 surrogates Cs, unassigned Cn: end the current token and are no token, so
                 that mojibake does not make unrelated documents alike
   ignored       format characters Cf (zero-width joiner, soft hyphen, BOM): deleted
   ============  ========================================================================

   So by default a word is a maximal run of letters, digits, ``_`` and the combining marks on
   them: ``re.findall(r"\\w+")`` but for marks, scripts without spaces, format characters and Pc
   other than ``_``. White space, punctuation, symbols and non-text code points separate words;
   no empty token can arise. ``keep`` gives the tokens of neardup before words were ``\\w+``.
3. Each token is hashed once from its bytes, by the hash version (``hash_version``): 2 reads
   them as little-endian 64-bit words (the last zero-padded), mixes all but the last with
   xxHash64's round and finishes with fmix64 over the last word and the length; 1 is FNV-1a over
   the bytes, then fmix64. A word n-gram is the ordered combination of n consecutive token
   hashes, never a joined string. With ``char_ngrams`` the units are code points instead of
   tokens (punctuation and symbols, and the marks on them, deleted under ``split`` and
   ``delete``, units under ``keep``; ``_`` a unit; runs of white space collapsed to one space and
   trimmed when ``collapse_whitespace``; non-text code points are units).
4. A document with fewer than n units has exactly one shingle made of all its units; an
   empty document (no units) has no shingles and is never a near-duplicate of anything.

Every hash is seeded and depends only on the bytes and the seed: the same on every machine, and
the same whichever path of the kernel (the eight-bytes-at-a-time ASCII path, the general one)
hashed a token.
"""

from __future__ import annotations

import sys
from typing import Optional, Tuple

import numpy as np
import pyarrow as pa

from .compile import kernel
from .arrays import arrow, cast_strings, read_only
from .charclasses import CONNECT, IGNORED, MARK, NOTEXT, PUNCT, SINGLE, SPACE, SYMBOL, WORD, char_classes
from ..config import PUNCTUATION_MODES, Shingling
from .hashing import GOLDEN, MASK64, fmix64, fmix64_py
from .lanes import bit_count, lowest_bit, word_bytes64

__all__ = [
    "to_arrow_strings", "normalize", "char_classes",
    "SPACE", "WORD", "MARK", "SINGLE", "SYMBOL", "PUNCT", "IGNORED", "NOTEXT", "CONNECT", "kernel_options",
]


def kernel_options(shingling: Shingling) -> tuple:
    """The tokenizer's options as the compiled kernels take them (see :func:`_units`), one tuple
    passed through unchanged by the kernels that call the tokenizer."""
    return (bool(shingling.char_ngrams), PUNCTUATION_MODES.index(shingling.punctuation),
            bool(shingling.collapse_whitespace), int(shingling.hash_version))


# the options of Shingling(): the kernels fold them in as constants (the common case's fast path)
DEFAULT_OPTIONS = kernel_options(Shingling())


# 64-bit constants (kept as numpy scalars so numba never mixes signed and unsigned).
_FNV_OFFSET = np.uint64(0xCBF29CE484222325)
_FNV_PRIME = np.uint64(0x100000001B3)
_COMBINE = np.uint64(GOLDEN)
_S33 = np.uint64(33)
_SPACE_UNIT = np.uint64(0x2545F4914F6CDD1D)


def to_arrow_strings(texts) -> pa.Array:
    """A list of str, a pyarrow (chunked) string array or a pandas Series as one large_string array.

    Nulls become empty strings (an empty document).
    """
    if isinstance(texts, pa.ChunkedArray):
        texts = texts.combine_chunks() if texts.num_chunks != 1 else texts.chunk(0)
    if not isinstance(texts, pa.Array) and "pandas" in sys.modules:  # no pandas loaded: no Series here
        if hasattr(texts, "to_numpy") and hasattr(texts, "dtype") and not isinstance(texts, np.ndarray):
            texts = pa.array(texts, type=pa.large_string(), from_pandas=True)
    if not isinstance(texts, pa.Array):
        if isinstance(texts, str):
            raise TypeError("texts must be a sequence of documents, not a single str")
        # built from the encoded strings (pa.array of a list imports pandas, 0.2-0.4 s on a first call)
        texts = arrow(["" if t is None else t for t in texts], pa.large_string())
    if pa.types.is_dictionary(texts.type):
        texts = texts.dictionary_decode()
    if not (pa.types.is_string(texts.type) or pa.types.is_large_string(texts.type)
            or pa.types.is_string_view(texts.type)):
        raise TypeError(f"texts must be strings, got Arrow type {texts.type}")
    texts = cast_strings(texts, pa.large_string())
    if texts.null_count:
        import pyarrow.compute as pc
        texts = pc.fill_null(texts, "")
    return texts


def normalize(texts, shingling: Shingling = Shingling()) -> pa.Array:
    """NFKC and lower-casing (as ``shingling`` says) in Arrow compute; returns a large_string
    array without nulls."""
    import pyarrow.compute as pc

    arr = to_arrow_strings(texts)
    if shingling.normalize_unicode:
        arr = pc.utf8_normalize(arr, form="NFKC")
    if shingling.lowercase:
        arr = pc.utf8_lower(arr)
    return arr


def arrow_buffers(arr: pa.Array) -> Tuple[np.ndarray, np.ndarray]:
    """(offsets int64[n+1], data uint8) of a large_string array, zero-copy, honouring slices,
    both read-only (:func:`neardup.kernels.arrays.read_only`: whether Arrow made the buffers
    mutable or not, the kernels see one type, the spans' too, and compile once)."""
    bufs = arr.buffers()
    n = len(arr)
    offsets = np.frombuffer(bufs[1], dtype=np.int64, count=arr.offset + n + 1)[arr.offset:]
    data = np.frombuffer(bufs[2], dtype=np.uint8) if bufs[2] is not None else np.zeros(0, np.uint8)
    return read_only(offsets), read_only(data)


def seed_state(seed: int) -> np.uint64:
    """The seeded start value of every shingle hash."""
    return np.uint64(fmix64_py((int(seed) * GOLDEN + 0x632BE59BD9B4E019) & MASK64))


# --------------------------------------------------------------------------- compiled kernels



@kernel()
def _decode(data, i, end):
    """(code point, byte length) of the UTF-8 sequence at data[i] (lenient on malformed bytes)."""
    b0 = np.int64(data[i])
    if b0 < 0x80:
        return b0, 1
    if b0 < 0xE0:
        n = 2
        cp = b0 & 0x1F
    elif b0 < 0xF0:
        n = 3
        cp = b0 & 0x0F
    else:
        n = 4
        cp = b0 & 0x07
    if i + n > end:
        return 0xFFFD, end - i
    for j in range(1, n):
        cp = (cp << 6) | (np.int64(data[i + j]) & 0x3F)
    if cp > 0x10FFFF:
        cp = 0xFFFD
    return cp, n


@kernel(inline="always")
def _byte(b, lower_ascii):
    if lower_ascii and b >= 65 and b <= 90:
        return np.uint64(b + 32)
    return np.uint64(b)


# The hash of a unit (a token, or a character with char_ngrams) depends on its UTF-8 bytes alone.
# It is computed as the bytes stream by, from a state (h, w, n): _start, _feed (one byte) and
# _finish; the plain twins are _hash_v1_py and _hash_v2_py.
#   version 1: FNV-1a over the bytes (h; w and n unused), then fmix64.
#   version 2: the bytes as little-endian 64-bit words, the last one zero-padded (1 to 8 bytes):
#              each word but the last mixed into h by _round (xxHash64's round), then
#              fmix64(h ^ last word ^ n * V2_LENGTH). No multiply per byte.
# Constants are spelled inside: numba resolves an inlined function's globals in the caller's module.

@kernel(inline="always")
def _round(h, w):
    h = h + w * np.uint64(0xC2B2AE3D27D4EB4F)
    h = (h << np.uint64(31)) | (h >> np.uint64(33))
    return h * np.uint64(0x9E3779B185EBCA87)


@kernel(inline="always")
def _start(hv):
    if hv == 1:
        return np.uint64(0xCBF29CE484222325), np.uint64(0), np.uint64(0)
    return np.uint64(0x27D4EB2F165667C5), np.uint64(0), np.uint64(0)


@kernel(inline="always")
def _feed(hv, h, w, n, b):
    if hv == 1:
        return (h ^ b) * np.uint64(0x100000001B3), w, n
    sh = (n & np.uint64(7)) << np.uint64(3)
    if sh == 0 and n > np.uint64(0):  # a full word waits and another byte follows: mix the word in
        h = _round(h, w)
        w = np.uint64(0)
    return h, w | (b << sh), n + np.uint64(1)


@kernel(inline="always")
def _finish(hv, h, w, n):
    if hv == 1:
        return fmix64(h)
    return fmix64(h ^ w ^ (n * np.uint64(0x165667B19E3779F9)))


# The event positions of each 8-bit mask (_EVENTS[e, r]: where the r-th set bit of e is) and
# their number: the word-boundary bits of eight bytes become positions without a branch.
_EVENTS = np.zeros((256, 8), dtype=np.uint64)
_EVENT_COUNT = np.array([bin(e).count("1") for e in range(256)], dtype=np.uint64)
for _e in range(256):
    _bits = [j for j in range(8) if _e >> j & 1]
    _EVENTS[_e, :len(_bits)] = _bits


@kernel(inline="always")
def _load8(data, p, k):
    """The k (1 to 8) bytes at data[p:] as a little-endian word, zero-padded. (Unsigned
    indices: numba adds no negative-index check, and the compiler merges the eight loads.)"""
    q = np.uint64(p)
    if p + 8 <= data.shape[0]:
        w = (np.uint64(data[q]) | (np.uint64(data[q + np.uint64(1)]) << np.uint64(8))
             | (np.uint64(data[q + np.uint64(2)]) << np.uint64(16))
             | (np.uint64(data[q + np.uint64(3)]) << np.uint64(24))
             | (np.uint64(data[q + np.uint64(4)]) << np.uint64(32))
             | (np.uint64(data[q + np.uint64(5)]) << np.uint64(40))
             | (np.uint64(data[q + np.uint64(6)]) << np.uint64(48))
             | (np.uint64(data[q + np.uint64(7)]) << np.uint64(56)))
        return w & (np.uint64(0xFFFFFFFFFFFFFFFF) >> np.uint64(64 - 8 * k))
    w = np.uint64(0)
    for r in range(k):
        w |= np.uint64(data[q + np.uint64(r)]) << np.uint64(8 * r)
    return w


@kernel(inline="always")
def _lower8(w):
    """+0x20 on each byte of w in A-Z (the bytes must be ASCII: no carry between bytes)."""
    ge_a = w + np.uint64(0x3F3F3F3F3F3F3F3F)   # high bit set where the byte >= 'A'
    gt_z = w + np.uint64(0x2525252525252525)   # high bit set where the byte > 'Z'
    return w + (((ge_a & ~gt_z) & np.uint64(0x8080808080808080)) >> np.uint64(2))


@kernel(inline="always")
def _hash_span_v2(data, a, e, lower_ascii):
    """Hash version 2 of the ASCII bytes data[a:e] (e > a), A-Z lower-cased with lower_ascii."""
    return fmix64(_unmixed_span_v2(data, a, e, lower_ascii))


@kernel(inline="always")
def _unmixed_span_v2(data, a, e, lower_ascii):
    """:func:`_hash_span_v2` but its last step (``fmix64``), which the caller does for many
    spans at once (a loop of that alone is vectorised: four or eight at a time)."""
    h = np.uint64(0x27D4EB2F165667C5)
    p = a
    while e - p > 8:
        w = _load8(data, p, 8)
        h = _round(h, _lower8(w) if lower_ascii else w)
        p += 8
    w = _load8(data, p, e - p)
    return h ^ (_lower8(w) if lower_ascii else w) ^ (np.uint64(e - a) * np.uint64(0x165667B19E3779F9))


@kernel(inline="always")
def _words_ascii_v2(data, start, end, lower_ascii, out):
    """The default case: the word tokens of ASCII text under ``split``, hash version 2, 64 bytes
    at a time. Returns their number, or -1 at the first non-ASCII byte.

    Each 64 bytes are classed at once (:func:`neardup.kernels.lanes.word_bytes64`: [0-9A-Za-z_]
    are the word bytes, as char_classes() says of ASCII; everything else separates), the
    positions where a word begins or ends are written to ``out`` eight at a time, as many as
    there are (the lowest set bit of the word's boundary bits, each cleared in turn: a branch
    per eight, not one per position), and then each word is hashed from its bytes
    (:func:`_hash_span_v2`, its last step for all words after the rest), in place: word t reads
    positions 2t and 2t + 1. The bytes that end
    ``data`` (fewer than 64 past ``p``) go eight at a time (:func:`_words_tail`).
    """
    m = np.int64(0)
    prev = np.uint64(0)  # whether the byte before the block is a word byte
    p = start
    last = data.shape[0] - 64  # the last place a 64-byte load may start
    while p < end and p <= last:
        word, high = word_bytes64(data, p)
        if end - p < 64:  # the bytes past the text: separators
            inside = (np.uint64(1) << np.uint64(end - p)) - np.uint64(1)
            word &= inside
            high &= inside
        if high:
            return -1
        ev = word ^ ((word << np.uint64(1)) | prev)  # where a word begins or ends
        prev = word >> np.uint64(63)
        base = np.uint64(p - start)
        c = bit_count(ev)
        q = m
        while True:  # eight positions a round; the ones past the c-th are overwritten or never read
            for r in range(8):
                out[q + r] = base + np.uint64(lowest_bit(ev))
                ev &= ev - np.uint64(1)
            q += 8
            if q >= m + c:
                break
        m += c
        p += 64
    if p < end:
        m = _words_tail(data, p, start, end, prev, m, out)
        if m < 0:
            return -1
    if m & 1:  # the last word ends with the text
        out[m] = np.uint64(end - start)
        m += 1
    n = m >> 1
    for t in range(n):
        out[t] = _hash_span_v2(data, start + np.int64(out[2 * t]), start + np.int64(out[2 * t + 1]), lower_ascii)
    return n


@kernel(inline="always")
def _words_tail(data, p, start, end, prev, m, out):
    """:func:`_words_ascii_v2`'s word boundaries of data[p:end], eight bytes at a time (SWAR: the
    same classes as :func:`neardup.kernels.lanes.word_bytes64`), the last bytes of ``data``
    where 64 cannot be loaded: ``m`` positions written before, ``prev`` whether the byte before
    p is a word byte. Returns the positions written in all, or -1 at the first non-ASCII byte.
    The positions are written without a branch (_EVENTS), eight each time."""
    hi = np.uint64(0x8080808080808080)
    mu = np.uint64(m)
    while p < end:
        k = min(8, end - p)
        w = _load8(data, p, k)  # zero bytes past the end: separators
        if w & hi:
            return -1
        x = w | np.uint64(0x2020202020202020)  # letters as lower case
        # a byte b < 0x80 in [lo, hi]: the high bit of (b + 0x80 - lo) & ~(b + 0x7F - hi)
        letter = (x + np.uint64(0x1F1F1F1F1F1F1F1F)) & ~(x + np.uint64(0x0505050505050505))
        digit = (w + np.uint64(0x5050505050505050)) & ~(w + np.uint64(0x4646464646464646))
        t = w ^ np.uint64(0x5F5F5F5F5F5F5F5F)
        under = ~(t + np.uint64(0x7F7F7F7F7F7F7F7F)) & ~t  # the byte is '_'
        word = (letter | digit | under) & hi
        bits = ((word >> np.uint64(7)) * np.uint64(0x0102040810204080)) >> np.uint64(56)  # bit j: byte j
        ev = (bits ^ ((bits << np.uint64(1)) | prev)) & np.uint64(0xFF)  # where a word begins or ends
        base = np.uint64(p - start)
        for r in range(8):
            out[mu + np.uint64(r)] = base + _EVENTS[ev, r]
        mu += _EVENT_COUNT[ev]
        prev = (bits >> np.uint64(7)) & np.uint64(1)
        p += 8
    return np.int64(mu)


@kernel()
def _char_units(data, start, end, table, keep, collapse_ws, hv, lower_ascii, bail, out):
    """The character units of data[start:end] (``char_ngrams``): punctuation and symbols are
    deleted unless kept, and so is a combining mark that follows no kept character; under
    ``collapse_ws`` a run of white space between characters is one space unit. Returns their
    number, or -1 at the first non-ASCII byte with ``bail``."""
    m = 0
    pending_space = False
    attach = False
    i = start
    while i < end:
        if bail and data[i] >= 0x80:
            return -1
        cp, ln = _decode(data, i, end)
        cls = table[cp]
        if cls == 6:  # IGNORED
            pass
        elif cls == 0 and collapse_ws:  # SPACE
            if m > 0:
                pending_space = True
            attach = False
        elif not keep and (cls == 4 or cls == 5 or (cls == 2 and not attach)):
            attach = False
        else:
            if pending_space:
                out[m] = _SPACE_UNIT
                m += 1
                pending_space = False
            h, w, n = _start(hv)
            for j in range(i, i + ln):
                h, w, n = _feed(hv, h, w, n, _byte(data[j], lower_ascii))
            out[m] = _finish(hv, h, w, n)
            m += 1
            attach = cls != 0
        i += ln
    return m


@kernel()
def _words_ascii_v1(data, start, end, table, split, lower_ascii, out):
    """The word tokens of ASCII text, hash version 1, each byte hashed as it comes, branch-free
    (selects instead of jumps: token boundaries are unpredictable branches): letters, digits
    and _ make a token, white space, symbols and (under split) punctuation end it. Returns their
    number, or -1 at the first non-ASCII byte."""
    m = 0
    h = _FNV_OFFSET
    intok = False
    for i in range(start, end):
        b = data[i]
        if b >= 0x80:
            return -1
        cls = table[b]
        isw = cls == 1 or cls == 8
        iss = cls == 0 or cls == 4 or (cls == 5 and split)
        out[m] = h  # written always, kept only when a token ends here
        m += 1 if (intok and iss) else 0
        bb = b + 32 if (lower_ascii and b >= 65 and b <= 90) else b
        hw = ((h if intok else _FNV_OFFSET) ^ np.uint64(bb)) * _FNV_PRIME
        h = hw if isw else h
        intok = isw or (intok and not iss)
    if intok:
        out[m] = h
        m += 1
    for j in range(m):
        out[j] = fmix64(out[j])
    return m


@kernel()
def _words_general(data, start, end, table, keep, delete, hv, lower_ascii, bail, out):
    """The word tokens of any text, one code point at a time: state 0 = outside a token, 1 = in a
    word token, 2 = in a token of its own (a character of a script without spaces; under keep a
    symbol or a punctuation mark), which combining marks extend. Returns their number, or -1 at
    the first non-ASCII byte with ``bail``."""
    m = 0
    state = 0
    h, w, n = _start(hv)
    i = start
    while i < end:
        if bail and data[i] >= 0x80:
            return -1
        cp, ln = _decode(data, i, end)
        cls = table[cp]
        if cls == 1 or (cls == 8 and not keep) or (cls == 2 and (state != 0 or keep)):
            # WORD, CONNECT, or a MARK on a token (under keep a mark may also begin a word)
            if state == 2 and cls != 2:
                out[m] = _finish(hv, h, w, n)
                m += 1
                state = 0
            if state == 0:
                h, w, n = _start(hv)
                state = 1
            for j in range(i, i + ln):
                h, w, n = _feed(hv, h, w, n, _byte(data[j], lower_ascii))
        elif cls == 6 or cls == 2 or (cls == 5 and delete):
            pass  # IGNORED, deleted PUNCT: deleted without ending the token; a MARK on nothing
        elif cls == 3 or (keep and (cls == 4 or cls == 5 or cls == 8)):
            # SINGLE, and under keep SYMBOL, PUNCT, CONNECT: a token of its own
            if state != 0:
                out[m] = _finish(hv, h, w, n)
                m += 1
            h, w, n = _start(hv)
            for j in range(i, i + ln):
                h, w, n = _feed(hv, h, w, n, _byte(data[j], lower_ascii))
            state = 2
        else:  # SPACE, NOTEXT, SYMBOL, split PUNCT: end the token
            if state != 0:
                out[m] = _finish(hv, h, w, n)
                m += 1
                state = 0
        i += ln
    if state != 0:
        out[m] = _finish(hv, h, w, n)
        m += 1
    return m


@kernel()
def _units(data, start, end, table, options, lower_ascii, bail, out):
    """Write the unit hashes of data[start:end] (tokens, or characters in char_mode) into out.

    Returns the number of units. ``out`` must hold at least end - start + 8 values. ``options`` is
    :func:`kernel_options`: char_mode, ``punct`` (the index of the punctuation mode in
    PUNCTUATION_MODES), collapse_ws and the hash version. With ``lower_ascii`` the bytes A-Z are
    hashed as a-z (the text is otherwise already normalised). With ``bail`` a text that is not
    pure ASCII is left alone at its first non-ASCII byte: the return value is then -1 (it must be
    normalised first, see :func:`prepare`).

    Words of ASCII text (most text) take a fast path where the punctuation mode allows it:
    version 1 byte by byte (:func:`_words_ascii_v1`), version 2 under split eight bytes at a time
    (:func:`_words_ascii_v2`); text that is not ASCII restarts on the general path.
    """
    char_mode, punct, collapse_ws, hv = options
    keep = punct == 2
    if char_mode:
        return _char_units(data, start, end, table, keep, collapse_ws, hv, lower_ascii, bail, out)
    split = punct == 0
    if not keep and hv == 1:
        m = _words_ascii_v1(data, start, end, table, split, lower_ascii, out)
        if m >= 0 or bail:
            return m
    elif not keep and split:
        m = _words_ascii_v2(data, start, end, lower_ascii, out)
        if m >= 0 or bail:
            return m
    return _words_general(data, start, end, table, keep, punct == 1, hv, lower_ascii, bail, out)


@kernel(inline="always")
def _shingle_hash(units, i, n, h0):
    h = h0
    for j in range(i, i + n):
        h = (h ^ units[j]) * _COMBINE
        h ^= h >> _S33
    return fmix64(h)


@kernel(inline="always")
def _shingles_in_place(units, m, n, h0):
    """The shingle hashes of m units, written over them (shingle i over unit i, which no later
    shingle reads); returns their number (0 when m == 0, 1 when 0 < m < n). One array in and
    out, so the compiler sees that and vectorises the loop (four or eight shingles at a time;
    with an output array that might be the input, the loop ran one shingle at a time)."""
    if m == 0:
        return 0
    if m < n:
        units[0] = _shingle_hash(units, 0, m, h0)
        return 1
    s = m - n + 1
    for i in range(s):
        units[i] = _shingle_hash(units, i, n, h0)
    return s


class TextSpans:
    """Documents that are spans of one byte buffer: document i is ``data[starts[i]:ends[i]]``
    (UTF-8), the buffer a block of the input as read (:func:`neardup.kernels.jsonl.extract`
    with ``in_place``: the JSON strings' escapes decoded where they stand). The kernels hash
    them where they are (:func:`prepare`), no copy gathers them; :meth:`to_arrow` makes the
    ``large_string`` array of them for anything else. Holds a view of the buffer (which the
    reader therefore never reuses while it lives)."""

    __slots__ = ("data", "starts", "ends")

    def __init__(self, data: np.ndarray, starts: np.ndarray, ends: np.ndarray):
        self.data, self.starts, self.ends = data, starts, ends

    def __len__(self) -> int:
        return len(self.starts)

    @property
    def type(self) -> pa.DataType:
        return pa.large_string()

    @property
    def nbytes(self) -> int:
        """What :meth:`to_arrow`'s array holds (its offsets and its bytes): what batching counts."""
        return 8 * len(self.starts) + int((self.ends - self.starts).sum())

    def lengths(self) -> np.ndarray:
        """The byte length of each document (int64)."""
        return self.ends - self.starts

    def slice(self, offset: int, length: int) -> "TextSpans":
        return TextSpans(self.data, self.starts[offset:offset + length], self.ends[offset:offset + length])

    def to_arrow(self, docs: Optional[np.ndarray] = None) -> pa.Array:
        """The documents (``docs`` of them: positions, in that order) as a large_string array."""
        starts, ends = self.starts, self.ends
        if docs is not None:
            docs = np.asarray(docs, np.int64)
            starts, ends = starts[docs], ends[docs]
        offsets = np.zeros(len(starts) + 1, dtype=np.int64)
        np.cumsum(ends - starts, out=offsets[1:])
        out = np.empty(int(offsets[-1]), dtype=np.uint8)
        _gather_spans(read_only(self.data), np.ascontiguousarray(starts), np.ascontiguousarray(ends), offsets, out)
        return pa.Array.from_buffers(pa.large_string(), len(starts), [None, pa.py_buffer(offsets), pa.py_buffer(out)])


    def to_pylist(self) -> list:
        return self.to_arrow().to_pylist()


@kernel(nogil=True)
def _gather_spans(data, starts, ends, offsets, out):
    for i in range(starts.shape[0]):
        out[offsets[i]:offsets[i + 1]] = data[starts[i]:ends[i]]


class Part:
    """Documents ready for the kernels: UTF-8 buffers (document d is ``data[starts[d]:ends[d]]``),
    which of them to process (``docs``), where their results go (``target``), whether the kernel
    lower-cases ASCII itself, and whether it leaves a document that is not pure ASCII for a
    second, normalised part (``bail``)."""

    __slots__ = ("starts", "ends", "data", "docs", "target", "lower_ascii", "bail")

    def __init__(self, starts, ends, data, docs, target, lower_ascii, bail=False):
        self.starts, self.ends, self.data, self.docs, self.target = starts, ends, data, docs, target
        self.lower_ascii, self.bail = lower_ascii, bail


def _arrow_part(arr: pa.Array, docs, target, lower_ascii, bail=False) -> Part:
    offsets, data = arrow_buffers(arr)
    return Part(offsets[:-1], offsets[1:], data, docs, target, lower_ascii, bail)


def prepare(texts, shingling: Shingling) -> Tuple[object, Part]:
    """The batch as one Arrow array (or the :class:`TextSpans` it came as) and the first part for
    the kernels: every document as it is.

    NFKC leaves ASCII unchanged and lower-casing ASCII is a byte operation, so documents that
    are pure ASCII need no normalising: the kernel lower-cases A-Z while hashing. When the text
    is to be normalised, the first part bails out of any document at its first non-ASCII byte
    (one pass over the bytes finds them; no separate scan), and :func:`normalised_part` makes the
    second part of those alone, through Arrow's utf8_normalize / utf8_lower. The result is the
    same as normalising everything first, at a fraction of the cost on mostly-ASCII corpora.
    """
    needs = bool(shingling.normalize_unicode or shingling.lowercase)
    if isinstance(texts, TextSpans):
        everything = np.arange(len(texts), dtype=np.int64)
        starts = read_only(np.ascontiguousarray(texts.starts, np.int64))
        ends = read_only(np.ascontiguousarray(texts.ends, np.int64))
        return texts, Part(starts, ends, read_only(texts.data), everything, everything,
                           bool(shingling.lowercase) and needs, bail=needs)
    arr = to_arrow_strings(texts)
    everything = np.arange(len(arr), dtype=np.int64)
    return arr, _arrow_part(arr, everything, everything, bool(shingling.lowercase) and needs, bail=needs)


def normalised_part(arr, docs: np.ndarray, shingling: Shingling) -> Part:
    """The documents ``docs`` of ``arr`` (an Arrow array or :class:`TextSpans`) normalised, as a
    part whose results go to ``docs``."""
    if isinstance(arr, TextSpans):
        sub = arr.to_arrow(docs)
    else:
        sub = arr if len(docs) == len(arr) else arr.take(pa.array(docs))
    return _arrow_part(normalize(sub, shingling), np.arange(len(docs), dtype=np.int64),
                       np.asarray(docs, np.int64), False)
