"""The report's word diff against a reference copy of its first implementation (a per-character
loop, its word rules those of neardup.kernels.shingles): the faster one must give byte-identical HTML on
every input."""

from __future__ import annotations

import difflib
import html
import random
from typing import List, Tuple

import pytest

from neardup.report.diff import diff_units, word_diff_html


# ---- reference: the implementation before the speed-up, verbatim -------------------------------

def ref_diff_units(text: str, *, punctuation: str = "split") -> List[Tuple[str, int, int]]:
    import unicodedata
    from neardup.kernels.shingles import CONNECT, IGNORED, MARK, PUNCT, SINGLE, SYMBOL, WORD, char_classes
    table = char_classes()
    keep = punctuation == "keep"
    out: List[Tuple[str, int, int]] = []
    start = -1
    state = 0

    def close(end):
        piece = "".join(ch for ch in text[start:end] if table[ord(ch)] != IGNORED
                        and not (table[ord(ch)] == PUNCT and punctuation == "delete"))
        out.append((unicodedata.normalize("NFKC", piece).lower(), start, end))

    for i, ch in enumerate(text):
        cls = table[ord(ch)]
        if cls == WORD or (cls == CONNECT and not keep) or (cls == MARK and (state or keep)):
            if state == 2 and cls != MARK:
                close(i)
                state = 0
            if state == 0:
                start, state = i, 1
        elif cls in (IGNORED, MARK) or (cls == PUNCT and punctuation == "delete"):
            continue
        elif cls == SINGLE or (keep and cls in (SYMBOL, PUNCT, CONNECT)):
            if state:
                close(i)
            start, state = i, 2
        else:
            if state:
                close(i)
                state = 0
    if state:
        close(len(text))
    return out


def ref_word_diff_html(left, right, *, max_words=600, punctuation="split"):
    ua, ub = ref_diff_units(left, punctuation=punctuation), ref_diff_units(right, punctuation=punctuation)
    cut_a, cut_b = len(ua) > max_words, len(ub) > max_words
    ua, ub = ua[:max_words], ub[:max_words]
    sm = difflib.SequenceMatcher(None, [u[0] for u in ua], [u[0] for u in ub], autojunk=False)
    changed_a = [False] * len(ua)
    changed_b = [False] * len(ub)
    for op, i1, i2, j1, j2 in sm.get_opcodes():
        if op != "equal":
            changed_a[i1:i2] = [True] * (i2 - i1)
            changed_b[j1:j2] = [True] * (j2 - j1)
    note = ' <span class="note">[... cut at {} words]</span>'.format(max_words)
    return (ref_render(left, ua, changed_a, "del", cut_a) + (note if cut_a else ""),
            ref_render(right, ub, changed_b, "ins", cut_b) + (note if cut_b else ""))


def ref_render(text, units, changed, tag, cut):
    out = []
    pos = 0
    k = 0
    while k < len(units):
        _, start, end = units[k]
        out.append(html.escape(text[pos:start]))
        if not changed[k]:
            out.append(html.escape(text[start:end]))
            pos = end
            k += 1
            continue
        last = k
        while last + 1 < len(units) and changed[last + 1]:
            last += 1
        out.append(f"<{tag}>{html.escape(text[start:units[last][2]])}</{tag}>")
        pos = units[last][2]
        k = last + 1
    if not cut:
        out.append(html.escape(text[pos:]))
    return "".join(out).strip()


# ---- inputs -------------------------------------------------------------------------------------

FIXED = [
    ("", ""), ("", "a b"), ("a b", ""), ("   ", " x "),
    ("a <b> c d e", "a <b> X d e & f"),
    ("东京塔是东京的著名景点。", "东京塔是大阪的著名景点。"),
    ("今日は良い天気です", "今日は悪い天気です"),
    ("The well-known cat, Hello.", "the well known dog hello"),
    ("caf\ufffd\ufffd au lait", "caf\ufffd au lait"),
    ("Cafe\u0301 na\u00efve \uff21\uff22\uff23 \ufb01ne", "café naive ABC fine"),  # marks, NFKC
    ("zero\u200dwidth\u200bjoin \u00adsoft hy\u00adphen", "zerowidth join soft hyphen"),
    ("\u0301lead mark, 東\u0301京 $5 +3 ™", "lead mark 東京 $6 3 ™"),
    ("\ud800 lone surrogate \udfff end", "lone surrogate end"),
    ("emoji 👍🏽 and 🇫🇷 flags", "emoji 👍 and flags"),
    ("Ärger über Öl 'quoted' \"double\" &amp;", "ärger uber öl quoted double &"),
    ("ไทย\u200bภาษา\u200bไทย", "ไทย\u200bภาษา"),
]

ALPHABET = ("abcXYZ019 \t\n.,;-'\"<>&_+=|\u00a9\u2764\ufe0f" "\u0301\u0308\u200b\u200d\u00ad\ufeff" "东京的。、" "ひらカタ"
            "€$™👍\ufffd\uff21\ufb01\u00e9\u2028\x00\x07")


def _fuzz(rng: random.Random, n: int) -> str:
    return "".join(rng.choice(ALPHABET) for _ in range(n))


def _mutate(rng: random.Random, text: str) -> str:
    chars = list(text)
    for _ in range(rng.randint(0, 8)):
        op = rng.random()
        i = rng.randint(0, len(chars))
        if op < 0.4 and chars:
            del chars[min(i, len(chars) - 1)]
        elif op < 0.8:
            chars.insert(i, rng.choice(ALPHABET))
        else:
            chars[i:i] = list(" inserted words here ")
    return "".join(chars)


@pytest.mark.parametrize("punctuation", ["split", "delete", "keep"])
def test_diff_units_same_as_reference(punctuation):
    rng = random.Random(7)
    texts = [t for pair in FIXED for t in pair] + [_fuzz(rng, rng.randint(0, 200)) for _ in range(300)]
    for t in texts:
        assert diff_units(t, punctuation=punctuation) == ref_diff_units(t, punctuation=punctuation), repr(t)


@pytest.mark.parametrize("punctuation", ["split", "delete", "keep"])
@pytest.mark.slow
def test_word_diff_html_byte_identical(punctuation):
    rng = random.Random(11)
    pairs = list(FIXED)
    for _ in range(300):
        a = _fuzz(rng, rng.randint(0, 150))
        pairs.append((a, _mutate(rng, a)))
    for a, b in pairs:
        for max_words in (600, 5, 1, 0):
            got = word_diff_html(a, b, max_words=max_words, punctuation=punctuation)
            assert got == ref_word_diff_html(a, b, max_words=max_words, punctuation=punctuation), (a, b, max_words)


@pytest.mark.slow
def test_word_diff_html_long_texts_identical():
    from neardup.testing.synth import generate_corpus
    corpus = generate_corpus(300, seed=3)
    texts = corpus.texts
    pairs = [(texts[int(c)], texts[int(i)]) for i, c in enumerate(corpus.cluster_of) if c != i][:20]
    pairs.append((" ".join(texts[:5]), " ".join(texts[1:6])))           # over 600 words: cut
    pairs.append(("东京塔是东京的著名景点。" * 80, "东京塔是大阪的著名景点。" * 80))  # CJK, cut
    assert len(pairs) > 5
    for a, b in pairs:
        for max_words in (600, 50):
            assert word_diff_html(a, b, max_words=max_words) == ref_word_diff_html(a, b, max_words=max_words)


ASCII = "abcXYZ019 \t\n.,;-'\"<>&_+=|$^`~\x00\x07"


@pytest.mark.parametrize("punctuation", ["split", "delete", "keep"])
def test_ascii_texts_same_as_reference(punctuation):
    """ASCII texts (the numpy path of the words-and-separators ones, under "split") cut up as the
    reference does, the first ``limit`` words as the first of its words."""
    from neardup.report.diff import _diff_units
    rng = random.Random(5)
    texts = ["", " ", "a", "Word", "  two  words ", "don't stop-me now", "x" * 50 + " y"]
    texts += ["".join(rng.choice(ASCII) for _ in range(rng.randint(0, 120))) for _ in range(400)]
    texts += [" ".join(rng.choice(["Alpha", "beta", "GAMMA", "d3lta", "e_f"]) for _ in range(rng.randint(1, 40)))
              for _ in range(100)]
    for t in texts:
        want = ref_diff_units(t, punctuation=punctuation)
        assert diff_units(t, punctuation=punctuation) == want, repr(t)
        for limit in (0, 1, 3):
            assert _diff_units(t, punctuation, limit) == want[:limit], (repr(t), limit)


def test_a_text_diffed_again_is_cut_up_once(monkeypatch):
    """word_diff_html's ``units``: the words of a text diffed again are taken from it, the HTML as
    without; the report keeps one for a cluster's pairs (its representative cut up once)."""
    import neardup.report.diff as diff
    from neardup.report import html as report_html
    calls = []
    cut = diff._diff_units
    monkeypatch.setattr(diff, "_diff_units", lambda text, *a: calls.append(text) or cut(text, *a))
    head, members = "the head text of a cluster", ["the head text of the cluster", "a head text of a cluster",
                                                   "the head text of a cluster too"]
    units: dict = {}
    for m in members:
        assert word_diff_html(head, m, units=units) == ref_word_diff_html(head, m)
    assert sorted(calls) == sorted([head] + members)
    calls.clear()
    entry = {"representative": "h", "members": ["h", "m0", "m1", "m2"],
             "info": {"h": (report_html.HEAD, None, None),
                      **{f"m{i}": (report_html.REMOVED, "h", 0.9) for i in range(3)}}}
    texts = {"h": head, **{f"m{i}": m for i, m in enumerate(members)}}
    pairs = report_html._pairs_html(entry, texts, 3, "split")
    assert len(pairs) == 3 and sorted(calls) == sorted([head] + members)
