"""The class of every code point (word, space, mark, ...), from Unicode general categories: the
table the tokenizer of :mod:`.shingles` reads, and the report's word diff (:mod:`neardup.report.diff`).
Plain numpy, no numba: a process that draws a report and runs no kernel (a Ray driver) does not
import numba for it."""

from __future__ import annotations

import unicodedata
from functools import lru_cache

import numpy as np

SPACE, WORD, MARK, SINGLE, SYMBOL, PUNCT, IGNORED, NOTEXT, CONNECT = range(9)


# Scripts written without spaces between words: each code point is a word.
_SINGLE_RANGES = (
    (0x0E00, 0x0EFF),    # Thai, Lao
    (0x0F00, 0x0FFF),    # Tibetan
    (0x1000, 0x109F),    # Myanmar
    (0x1780, 0x17FF),    # Khmer
    (0x19E0, 0x19FF),    # Khmer symbols
    (0x2E80, 0x2FDF),    # CJK radicals, Kangxi radicals
    (0x3005, 0x3007),    # ideographic iteration mark, closing mark, number zero
    (0x3040, 0x30FF),    # Hiragana, Katakana
    (0x3100, 0x312F),    # Bopomofo
    (0x31F0, 0x31FF),    # Katakana phonetic extensions
    (0x3400, 0x4DBF),    # CJK extension A
    (0x4E00, 0x9FFF),    # CJK unified ideographs
    (0xA000, 0xA4CF),    # Yi
    (0xF900, 0xFAFF),    # CJK compatibility ideographs
    (0xFF66, 0xFF9F),    # half-width Katakana
    (0x20000, 0x323AF),  # CJK extensions B to H
)


_TABLE_VERSION = 3


@lru_cache(maxsize=1)
def char_classes() -> np.ndarray:
    """The class of every code point (uint8, 0x110000 entries), from Unicode general categories.

    Built once from :mod:`unicodedata` (the Unicode version of the running Python) and kept in
    ``~/.cache/neardup`` (or ``$NEARDUP_CACHE``) so that later runs load it in a millisecond.
    """
    import os
    cache_dir = os.environ.get("NEARDUP_CACHE") or os.path.join(os.path.expanduser("~"), ".cache", "neardup")
    path = os.path.join(cache_dir, f"char_classes-u{unicodedata.unidata_version}-v{_TABLE_VERSION}.npy")
    try:
        table = np.load(path)
        if table.shape == (0x110000,) and table.dtype == np.uint8:
            return table
    except (OSError, ValueError):
        pass
    table = _build_char_classes()
    try:
        os.makedirs(cache_dir, exist_ok=True)
        tmp = f"{path}.{os.getpid()}.tmp.npy"
        np.save(tmp, table)
        os.replace(tmp, path)
    except OSError:  # a read-only home: build it each time
        pass
    return table


def _build_char_classes() -> np.ndarray:
    table = np.full(0x110000, WORD, dtype=np.uint8)
    cat_class = {"Z": SPACE, "L": WORD, "N": WORD, "M": MARK, "S": SYMBOL, "P": PUNCT}
    for cp in range(0x110000):
        cat = unicodedata.category(chr(cp))
        head = cat[0]
        if cat == "Pc":  # connector punctuation (_): a word character, as in \w
            table[cp] = CONNECT
        elif head in cat_class:
            table[cp] = cat_class[head]
        elif cat == "Cc":
            table[cp] = SPACE
        elif cat == "Cf":
            table[cp] = IGNORED
        else:  # Co, Cs, Cn: private use, surrogates, unassigned
            table[cp] = NOTEXT
    for lo, hi in _SINGLE_RANGES:
        seg = table[lo:hi + 1]
        seg[(seg == WORD)] = SINGLE
    table[0x200B] = SPACE  # zero-width space separates words in Thai and Khmer text
    table[0xFFFD] = NOTEXT  # the replacement character (So) stands for bytes that failed to decode
    return table
