"""The plain-Python twin of :mod:`.shingles`: the units (words or characters), shingles and
shingle hashes of one document, written for reading. The tests hold the kernels to it, and it is
the specification of what a word and a shingle are."""

from __future__ import annotations

from typing import List, Tuple

from ..config import Shingling, Sketch
from .hashing import GOLDEN, MASK64, fmix64_py
from .shingles import (CONNECT, IGNORED, MARK, PUNCT, SINGLE, SPACE, SYMBOL, WORD, _SPACE_UNIT, char_classes,
                       normalize, seed_state)
def _hash_v1_py(b: bytes) -> int:
    """Hash version 1 of a unit's bytes: FNV-1a, then fmix64."""
    h = 0xCBF29CE484222325
    for byte in b:
        h = ((h ^ byte) * 0x100000001B3) & MASK64
    return fmix64_py(h)


def _hash_v2_py(b: bytes) -> int:
    """Hash version 2 of a unit's bytes (not empty): little-endian 64-bit words, the last one
    zero-padded; every word but the last mixed in by xxHash64's round, the last word and the
    length by fmix64."""
    h = 0x27D4EB2F165667C5
    n = len(b)
    i = 0
    while n - i > 8:
        h = (h + int.from_bytes(b[i:i + 8], "little") * 0xC2B2AE3D27D4EB4F) & MASK64
        h = ((h << 31) | (h >> 33)) & MASK64
        h = (h * 0x9E3779B185EBCA87) & MASK64
        i += 8
    last = int.from_bytes(b[i:], "little")
    return fmix64_py(h ^ last ^ ((n * 0x165667B19E3779F9) & MASK64))


UNIT_HASHES = {1: _hash_v1_py, 2: _hash_v2_py}  # hash version -> the plain hash of a unit's bytes


def tokens_python(text: str, **options) -> List[str]:
    """The units (words, or characters with ``char_ngrams``) of one document, in plain Python;
    ``options`` are those of :class:`neardup.config.Shingling`."""
    return _tokens(text, Shingling(**options))


def _tokens(text: str, shingling: Shingling) -> List[str]:
    keep = shingling.punctuation == "keep"
    delete = shingling.punctuation == "delete"
    table = char_classes()
    # Arrow's utf8_normalize and utf8_lower are the reference; the twin follows them through Arrow
    # for one document so that the oracle tests the tokenizer, not two Unicode databases.
    text = normalize([text], shingling)[0].as_py()
    units: List[str] = []
    if shingling.char_ngrams:
        pending = False
        attach = False  # whether a combining mark here belongs to the unit before it
        for ch in text:
            cls = table[ord(ch)]
            if cls == IGNORED:
                continue
            if cls == SPACE and shingling.collapse_whitespace:
                pending = bool(units)
                attach = False
            elif not keep and (cls in (SYMBOL, PUNCT) or (cls == MARK and not attach)):
                attach = False
            else:
                if pending:
                    units.append(" ")
                    pending = False
                units.append(ch)
                attach = cls != SPACE
        return units
    cur: List[str] = []
    state = 0  # 0: outside a token; 1: in a word; 2: in a token of its own
    for ch in text:
        cls = table[ord(ch)]
        if cls == WORD or (cls == CONNECT and not keep) or (cls == MARK and (state or keep)):
            if state == 2 and cls != MARK:
                units.append("".join(cur))
                state = 0
            if state == 0:
                cur = []
                state = 1
            cur.append(ch)
        elif cls in (IGNORED, MARK) or (cls == PUNCT and delete):
            continue
        elif cls == SINGLE or (keep and cls in (SYMBOL, PUNCT, CONNECT)):
            if state:
                units.append("".join(cur))
            cur = [ch]
            state = 2
        else:  # SPACE, NOTEXT, SYMBOL, split PUNCT
            if state:
                units.append("".join(cur))
                state = 0
    if state:
        units.append("".join(cur))
    return units


def shingles_python(text: str, **options) -> List[Tuple[str, ...]]:
    """The shingles of one document as tuples of units (a short document is one shingle);
    ``options`` are those of :class:`neardup.config.Shingling`."""
    return _shingles(text, Shingling(**options))


def _shingles(text: str, shingling: Shingling) -> List[Tuple[str, ...]]:
    units = _tokens(text, shingling)
    n = shingling.ngram
    if not units:
        return []
    if len(units) < n:
        return [tuple(units)]
    return [tuple(units[i:i + n]) for i in range(len(units) - n + 1)]


def shingle_hashes_python(text: str, *, seed: int = Sketch.seed, **options) -> List[int]:
    """The sorted set of 64-bit shingle hashes of one document, computed in plain Python;
    ``options`` are those of :class:`neardup.config.Shingling`."""
    shingling = Shingling(**options)
    space = shingling.char_ngrams and shingling.collapse_whitespace  # the collapsed space is a unit of its own
    h0 = int(seed_state(seed))
    unit_hash = UNIT_HASHES[shingling.hash_version]
    out = set()
    for sh in _shingles(text, shingling):
        h = h0
        for unit in sh:
            u = int(_SPACE_UNIT) if unit == " " and space else unit_hash(unit.encode("utf-8"))
            h = ((h ^ u) * GOLDEN) & MASK64
            h ^= h >> 33
        out.add(fmix64_py(h))
    return sorted(out)
