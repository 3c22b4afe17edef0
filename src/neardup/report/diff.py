"""The word diff of two documents for the report: the words as neardup's tokenizer cuts them
(:func:`diff_units`), compared and shown as written, changed runs in ``<del>`` / ``<ins>``
(:func:`word_diff_html`)."""

from __future__ import annotations

import difflib
import html
from typing import Dict, List, Optional, Tuple

import numpy as np

from ..config import Shingling

__all__ = ["diff_units", "word_diff_html"]


def diff_units(text: str, *, punctuation: str = Shingling.punctuation) -> List[Tuple[str, int, int]]:
    """The words of ``text`` as the tokenizer cuts them, with where they lie in the text.

    Returns (key, start, end) per token: ``text[start:end]`` is the token as written and ``key``
    its normalised form (NFKC, lower case) that the diff compares. The rules are those of
    :mod:`neardup.kernels.shingles` (a word is a run of letters, digits, _ and the marks on them; a
    character of a script written without spaces, and under ``keep`` a symbol or a punctuation
    mark, are tokens of their own; white space, non-text code points, symbols and under ``split``
    punctuation separate), applied
    to the text as written so that the diff can show it as written.
    """
    return _diff_units(text, punctuation, None)


# The class of each character for the diff (by the classes of neardup.kernels.shingles), one letter: S
# separates, K is skipped (inside a token but not part of its key), W is a word character, M a
# mark, O a token of its own.
_DIFF_LETTERS = {"split": b"SWMOSSKSW", "delete": b"SWMOSKKSW", "keep": b"SWMOOOKSO"}
# A token: a one-character token with the marks that follow it, or a run of word characters and
# marks (under keep a mark may begin it; otherwise a mark on no token is skipped); skipped
# characters inside either, and at its end up to the character that closes it, belong to its span.
_DIFF_TOKEN = {}


def _diff_units(text: str, punctuation: str, limit: Optional[int]) -> List[Tuple[str, int, int]]:
    """:func:`diff_units`, the first ``limit`` tokens only when limit is not None.

    The characters are classed in one numpy lookup and cut into tokens by one regular expression
    over a string of class letters (one per character), or for an ASCII text of words and
    separators alone (:func:`_ascii_words`) by numpy; only the tokens cost Python work.
    """
    import re
    import unicodedata
    from itertools import islice

    from ..kernels.charclasses import char_classes  # numpy alone: no numba imported for a report
    punctuation = Shingling(punctuation=punctuation).punctuation  # checked
    if punctuation not in _DIFF_TOKEN:
        _DIFF_TOKEN[punctuation] = re.compile(r"O[MK]*|[WM][WMK]*" if punctuation == "keep" else r"O[MK]*|W[WMK]*")
    if not text:
        return []
    cps = np.frombuffer(text.encode("utf-32-le", "surrogatepass"), dtype="<u4")
    lut = np.frombuffer(_DIFF_LETTERS[punctuation], dtype=np.uint8)
    letters = lut[char_classes()[cps]]
    if text.isascii():
        words = _ascii_words(text, letters, limit)
        if words is not None:
            return words
    matches = _DIFF_TOKEN[punctuation].finditer(letters.tobytes().decode("ascii"))
    if limit is not None:
        matches = islice(matches, limit)
    out: List[Tuple[str, int, int]] = []
    normalize = unicodedata.normalize
    for m in matches:
        start, end = m.span()
        piece = text[start:end]
        if "K" in m.group():
            piece = "".join(ch for ch, c in zip(piece, m.group()) if c != "K")
        out.append((piece.lower() if piece.isascii() else normalize("NFKC", piece).lower(), start, end))
    return out


_WORD, _SEPARATOR = ord("W"), ord("S")


def _ascii_words(text: str, letters: np.ndarray, limit: Optional[int]) -> Optional[List[Tuple[str, int, int]]]:
    """The tokens of an ASCII ``text`` whose characters are all word characters or separators
    (``letters``: their class letters; punctuation "split"): each run of word characters, its key
    the run in lower case, found with numpy rather than a match each; None for any other text."""
    word = letters == _WORD
    if np.count_nonzero(word) + np.count_nonzero(letters == _SEPARATOR) != len(letters):
        return None
    edges = np.flatnonzero(np.diff(word.view(np.int8), prepend=0, append=0)).tolist()
    starts, ends = edges[0::2], edges[1::2]
    if limit is not None:
        starts, ends = starts[:limit], ends[:limit]
    lower = text.lower()
    return [(lower[start:end], start, end) for start, end in zip(starts, ends)]


def word_diff_html(left: str, right: str, *, max_words: int = 600, punctuation: str = Shingling.punctuation,
                   units: Optional[Dict[str, list]] = None) -> Tuple[str, str]:
    """Word-level diff of two texts, HTML-escaped, with the words of the tokenizer.

    Returns (left_html, right_html): words of ``left`` missing from ``right`` are wrapped in
    ``<del>``, words of ``right`` missing from ``left`` in ``<ins>``; the text between words
    (white space, punctuation) is shown as written. Words are those of :func:`diff_units`, so a
    Chinese or Japanese sentence is compared character by character and only the changed
    characters are marked. Texts longer than ``max_words`` words are cut there (a note says so).
    ``units``: a dict, kept by the caller across calls of the same ``max_words`` and
    ``punctuation``, where the words of each text are kept: a text diffed again (a cluster's
    representative against each of its members) is cut up once.
    """
    # one token past the cut says whether there is a cut; the rest of a long text is never cut up
    ua, ub = _units(left, punctuation, max_words + 1, units), _units(right, punctuation, max_words + 1, units)
    cut_a, cut_b = len(ua) > max_words, len(ub) > max_words
    ua, ub = ua[:max_words], ub[:max_words]
    sm = difflib.SequenceMatcher(None, [u[0] for u in ua], [u[0] for u in ub], autojunk=False)
    changed_a = []
    changed_b = []
    for op, i1, i2, j1, j2 in sm.get_opcodes():
        if op != "equal":
            changed_a.append((i1, i2))
            changed_b.append((j1, j2))
    note = ' <span class="note">[... cut at {} words]</span>'.format(max_words)
    return (_render_diff(left, ua, changed_a, "del", cut_a) + (note if cut_a else ""),
            _render_diff(right, ub, changed_b, "ins", cut_b) + (note if cut_b else ""))


def _units(text: str, punctuation: str, limit: int, kept: Optional[Dict[str, list]]) -> list:
    """:func:`_diff_units` of ``text``, from ``kept`` where it holds them (put there otherwise)."""
    if kept is None:
        return _diff_units(text, punctuation, limit)
    found = kept.get(text)
    if found is None:
        found = kept[text] = _diff_units(text, punctuation, limit)
    return found


def _render_diff(text: str, units, changed, tag: str, cut: bool) -> str:
    """The text with each run of changed words in <tag> (the text between two changed words of a
    run goes inside too); after the last word, the rest of the text unless it was cut.

    ``changed``: the (first, past the last) unit indexes of the changed runs, in order (those of
    ``SequenceMatcher.get_opcodes``; runs that touch are one run). The text between two runs is
    escaped in one piece (escaping is per character, so this is the same as word by word).
    """
    out: List[str] = []
    pos = 0
    k = 0
    n = len(units)
    while k < len(changed):
        first, past = changed[k]
        k += 1
        while k < len(changed) and changed[k][0] == past:  # an insert next to a replace, say
            past = changed[k][1]
            k += 1
        if first >= past:  # nothing of this side changed (an insert on the other side)
            continue
        start, end = units[first][1], units[past - 1][2]
        out.append(html.escape(text[pos:start]))
        out.append(f"<{tag}>{html.escape(text[start:end])}</{tag}>")
        pos = end
    if not cut:
        out.append(html.escape(text[pos:]))
    elif n:
        out.append(html.escape(text[pos:max(pos, units[n - 1][2])]))
    return "".join(out).strip()
