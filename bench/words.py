"""What a word is, measured: a corpus of realistic copies, truth by the usual word definition,
and neardup (defaults), datasketch and rensa graded against it at threshold 0.8.

    .venv/bin/python bench/words.py                        # 30,000 documents, seed 0
    .venv/bin/python bench/words.py --docs 5000 --tools neardup

The corpus (``generate``). English-like text: Zipf-distributed pseudo-words among common
function words, with recurring hyphenated compounds (``state-of-the-art``), contractions
(``don't``), numbers (``3.5``, ``1,250``), a little code (``foo.bar(x)``, ``snake_case``) and
symbols (``$5``, ``©``); 10% of the documents are in Cyrillic. 30% of the documents carry one or
two of 25 boilerplate blocks (cookie notices, licences). A third of the documents are edited
copies of another one; each copy gets a content edit of random strength (sentences deleted and
inserted, words replaced) and, each with its own probability, the edits real copies show:

    rehyphenation   compounds written with a space, an en dash or (rarely) run together
    punctuation     commas dropped and added, ``.`` -> ``;``, straight -> curly quotes and
                    apostrophes, ``...`` -> ``…``, no space after a full stop (``end.Start``),
                    brackets -> commas
    case            sentences in capitals, the whole text lower-cased
    apostrophes     dropped (``don't`` -> ``dont``), the way informal re-posts write them
    boilerplate     a block added or removed
    layout          lines re-wrapped, doubled spaces

1.5% of the documents are mojibake: Cyrillic text (with some ASCII names and numbers) whose UTF-8
bytes were decoded as ASCII with replacement, so every Cyrillic letter became two U+FFFD.

Truth: the usual word definition, the peers' (words = maximal runs of letters, digits and _
after NFKC and lower-casing, everything else separates, ``re.findall(r"\\w+")``), word 5-grams,
exact Jaccard. Only pairs inside a planted cluster can be similar (unrelated documents share at most
boilerplate, checked: ``max_unrelated_jaccard`` on a sample); removals whose representative lies
outside the removed document's cluster are graded by computing their Jaccard on the spot.

Graded at threshold 0.8:
    residual share      true pairs (J >= 0.8) whose two documents were both kept
    false removals      removed documents whose exact J with the representative the tool names
                        for them is below 0.75 (a margin under the threshold, as in pipeline.py)

Tools: neardup (``python -m neardup dedup`` with its defaults), optionally neardup with
``--punctuation delete``, ``--punctuation keep`` (symbols and punctuation as tokens, the words of
before ``\\w+``) or ``--hash-version 1``, and the pre-change checkout (``--base``); datasketch
(MinHashLSH, no verification, as its users run it) and rensa (RMinHashLSH, 8 bands) given the same
words as the truth (word 5-grams joined by a space), through bench/peers.py.

Also measured: mean |estimate - exact J| of neardup's k = 128 signatures (``MinHasher`` with its
defaults) over the planted pairs with exact J >= 0.5, and the same for the peers' signatures; and
the apostrophe study (``apostrophe``): exact J of the planted pairs under three rules for an
apostrophe between two letters (split it, delete it, or keep it inside the word).

Writes bench/results/words.json (``--output``) and prints a table.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
import unicodedata
from pathlib import Path
from typing import Dict, List, Optional, Sequence

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import RESULTS_DIR, run_header, union_find_removed, write_json  # noqa: E402,F401

NGRAM = 5
THRESHOLD = 0.8
FALSE_BELOW = 0.75
GENERATOR_VERSION = 3

# --------------------------------------------------------------------------- the generator

FUNCTION_WORDS = ("the of and to a in is that it for was on are as with be by this at from or an "
                  "have not but which they their one all were we can there has more been if will "
                  "would so its also what when about into than other some these only may time such "
                  "then after most over first new used two like very just where well any each much "
                  "through between both under").split()
CONTRACTIONS = ["don't", "it's", "we're", "can't", "isn't", "they're", "you'll", "I'm", "won't",
                "that's", "doesn't", "there's", "we've", "wasn't", "let's", "couldn't"]
CODE = ["foo.bar(x)", "snake_case_name", "x=1", "std::vector", "os.path.join", "user@example.com",
        "https://example.org/a/b", "v2.3.1", "a/b", "C++"]
SYMBOLS = ["$5", "€20", "©", "+", "=", "%", "&"]
_CYR = dict(zip("abcdefghijklmnopqrstuvwxyz", "абцдефгхийклмнопярстуввхыз"))
_CONS = "b c d f g h j k l m n p r s t v w z br ch st tr pl gr sh th".split()
_VOWS = "a e i o u ai ea ou io".split()


def _pseudo_words(rng, n: int) -> List[str]:
    out = set()
    while len(out) < n:
        k = int(rng.integers(1, 4))
        w = "".join(rng.choice(_CONS) + rng.choice(_VOWS) for _ in range(k))
        if rng.random() < 0.4:
            w += rng.choice(["n", "s", "t", "r", "l", "ng", "st"])
        out.add(w)
    return sorted(out)


class Lexicon:
    def __init__(self, rng, n_words: int = 20000, n_compounds: int = 600):
        self.words = _pseudo_words(rng, n_words)
        ranks = np.arange(1, n_words + 1, dtype=np.float64)
        p = 1.0 / ranks ** 1.05
        self.cdf = np.cumsum(p / p.sum())
        self.compounds = []
        for _ in range(n_compounds):
            parts = rng.choice(self.words[:3000], size=int(rng.choice([2, 2, 2, 3, 4])))
            self.compounds.append("-".join(parts))

    def word(self, rng, r=None, u=None, plain=False) -> str:
        r = rng.random() if r is None else r
        if plain and 0.41 <= r < 0.44:
            r = 0.5  # words only: no numbers, code or symbols
        if r < 0.35:
            return str(rng.choice(FUNCTION_WORDS))
        if r < 0.39:
            return self.compounds[int(rng.integers(len(self.compounds)))]
        if r < 0.41:
            return str(rng.choice(CONTRACTIONS))
        if r < 0.43:
            f = rng.random()
            v = int(rng.integers(0, 10000))
            return (f"{v / 100:.1f}" if f < 0.3 else f"{v:,}" if f < 0.6 else f"{v % 100}%" if f < 0.7
                    else str(v))
        if r < 0.435:
            return str(rng.choice(CODE))
        if r < 0.44:
            return str(rng.choice(SYMBOLS))
        u = rng.random() if u is None else u
        return self.words[min(int(np.searchsorted(self.cdf, u)), len(self.words) - 1)]

    def sentence(self, rng, cyrillic: bool = False, latin_share: float = 0.08, plain: bool = False) -> str:
        n = int(rng.integers(6, 22))
        rs, us = rng.random(n).tolist(), rng.random(n).tolist()
        toks = [self.word(rng, r, u, plain) for r, u in zip(rs, us)]
        if cyrillic:
            toks = [("".join(_CYR.get(c, c) for c in t) if rng.random() >= latin_share else t) for t in toks]
        for i in range(n - 1):
            if rng.random() < 0.07:
                toks[i] += ","
        if rng.random() < 0.1 and n > 4:
            a = int(rng.integers(1, n - 2))
            b = min(n - 1, a + int(rng.integers(1, 4)))
            q = rng.choice(['()', '""', "''"])
            toks[a] = q[0] + toks[a]
            toks[b] = toks[b].rstrip(",") + q[1]
        s = " ".join(toks)
        s = s[0].upper() + s[1:]
        return s + str(rng.choice([".", ".", ".", ".", ".", "?", "!", "..."]))


def _boilerplate(lex: Lexicon, n: int = 25) -> List[str]:
    rng = np.random.default_rng(12345)
    return [" ".join(lex.sentence(rng) for _ in range(int(rng.integers(1, 4)))) for _ in range(n)]


def _document(lex, rng, cyrillic=False, latin_share=0.08, plain=False) -> List[List[str]]:
    n = int(rng.integers(8, 31))
    sents = [lex.sentence(rng, cyrillic, latin_share, plain) for _ in range(n)]
    paras, i = [], 0
    while i < n:
        k = int(rng.integers(3, 7))
        paras.append(sents[i:i + k])
        i += k
    return paras


def _render(paras: List[List[str]]) -> str:
    return "\n\n".join(" ".join(p) for p in paras)


# each format edit: (name, probability that a copy gets it)
FORMAT_EDITS = [("rehyphenation", 0.5), ("punctuation", 0.5), ("case", 0.35), ("apostrophes", 0.15),
                ("boilerplate", 0.3), ("layout", 0.3)]


def _content_edit(lex, rng, paras, cyrillic):
    s = rng.uniform(0, 1)
    out = []
    for p in paras:
        q = []
        for sent in p:
            if rng.random() < 0.08 * s:
                continue  # deleted
            if rng.random() < 0.25 * s:  # some words replaced
                toks = sent.split(" ")
                for _ in range(1 + int(rng.integers(0, 2))):
                    toks[int(rng.integers(len(toks)))] = lex.word(rng)
                sent = " ".join(toks)
            q.append(sent)
            if rng.random() < 0.08 * s:
                q.append(lex.sentence(rng, cyrillic))  # inserted
        if q:
            out.append(q)
    return out or paras


def _rehyphenate(rng, text):
    def sub(m):
        r = rng.random()
        sep = " " if r < 0.7 else "\u2013" if r < 0.85 else "" if r < 0.95 else "-\n"
        return m.group(1) + sep
    p = rng.uniform(0.3, 1.0)
    return re.sub(r"(\w)-(?=\w)", lambda m: sub(m) if rng.random() < p else m.group(0), text)


def _punctuation(rng, text):
    text = re.sub(r",", lambda m: "" if rng.random() < 0.5 else ",", text)
    text = re.sub(r"(\w) (?=\w)", lambda m: m.group(1) + (", " if rng.random() < 0.03 else " "), text)
    text = re.sub(r"\. (?=[A-ZА-Я])", lambda m: "; " if rng.random() < 0.1 else
                  "." if rng.random() < 0.3 else ". ", text)
    if rng.random() < 0.6:
        text = text.replace("'", "\u2019")
        text = re.sub(r'"(\w[^"]*)"', "\u201c\\1\u201d", text)
    if rng.random() < 0.5:
        text = text.replace("...", "\u2026")
    if rng.random() < 0.5:
        text = re.sub(r" ?\(([^()]*)\)", r", \1,", text)
    return text


def _case(rng, text):
    if rng.random() < 0.4:
        return text.lower()
    return re.sub(r"[^.!?\n]+[.!?]", lambda m: m.group(0).upper() if rng.random() < 0.15 else m.group(0), text)


def _apostrophes(rng, text):
    return re.sub(r"(\w)['\u2019](\w)", r"\1\2", text)


def _layout(rng, text):
    text = re.sub(r" ", lambda m: "\n" if rng.random() < 0.08 else "  " if rng.random() < 0.03 else " ", text)
    return text


def _mojibake(text: str) -> str:
    return text.encode("utf-8").decode("ascii", errors="replace")


class WordCorpus:
    def __init__(self, texts, cluster_of, edits, kind):
        self.texts = texts
        self.cluster_of = np.asarray(cluster_of, np.int64)   # index of the original, or itself
        self.edits = edits                                  # format edits applied to each copy
        self.kind = kind                                    # "latin", "cyrillic", "mojibake"


def generate(n_docs: int, seed: int = 0, copy_share: float = 1 / 3, mojibake_share: float = 0.015,
             cyrillic_share: float = 0.10, boilerplate_share: float = 0.3) -> WordCorpus:
    """Originals and their edited copies, interleaved in random order (see the module docstring)."""
    rng = np.random.default_rng(seed)
    lex = Lexicon(np.random.default_rng(1000 + seed))
    boiler = _boilerplate(lex)
    n_copies = int(n_docs * copy_share)
    n_orig = n_docs - n_copies
    originals = []
    for i in range(n_orig):
        r = rng.random()
        kind = "mojibake" if r < mojibake_share else "cyrillic" if r < mojibake_share + cyrillic_share else "latin"
        # mojibake: a Cyrillic body of words only that failed to decode (an e-mail), so nothing but
        # U+FFFD, white space and punctuation is left of it (with a boilerplate block, some ASCII)
        moj = kind == "mojibake"
        paras = _document(lex, rng, cyrillic=kind != "latin", latin_share=0.0 if moj else 0.08, plain=moj)
        blocks = []
        if rng.random() < boilerplate_share:
            blocks = [int(b) for b in rng.choice(len(boiler), size=int(rng.integers(1, 3)), replace=False)]
        originals.append((kind, paras, blocks))
    texts, cluster, edits, kinds = [], [], [], []

    def full(paras, blocks, kind):
        head = [boiler[b] for b in blocks[:1]]
        tail = [boiler[b] for b in blocks[1:]]
        t = "\n\n".join(head + [_render(paras)] + tail)
        return _mojibake(t) if kind == "mojibake" else t

    for kind, paras, blocks in originals:
        texts.append(full(paras, blocks, kind))
        cluster.append(len(texts) - 1)
        edits.append([])
        kinds.append(kind)
    orig_index = np.arange(n_orig)
    # copies: of an original picked at random (a cluster may get several)
    for _ in range(n_copies):
        o = int(rng.integers(n_orig))
        kind, paras, blocks = originals[o]
        paras = _content_edit(lex, rng, paras, kind != "latin")
        applied = [name for name, p in FORMAT_EDITS if rng.random() < p]
        bl = list(blocks)
        if "boilerplate" in applied:
            if bl and rng.random() < 0.5:
                bl.pop(int(rng.integers(len(bl))))
            else:
                bl.append(int(rng.integers(len(boiler))))
        head = [boiler[b] for b in bl[:1]]
        tail = [boiler[b] for b in bl[1:]]
        t = "\n\n".join(head + [_render(paras)] + tail)
        for name, fn in (("rehyphenation", _rehyphenate), ("punctuation", _punctuation), ("case", _case),
                         ("apostrophes", _apostrophes), ("layout", _layout)):
            if name in applied:
                t = fn(rng, t)
        if kind == "mojibake":
            t = _mojibake(t)
        texts.append(t)
        cluster.append(int(orig_index[o]))
        edits.append(applied)
        kinds.append(kind)
    order = rng.permutation(len(texts))
    inv = np.empty_like(order)
    inv[order] = np.arange(len(order))
    texts = [texts[i] for i in order]
    cluster = inv[np.asarray(cluster)[order]]
    edits = [edits[i] for i in order]
    kinds = [kinds[i] for i in order]
    return WordCorpus(texts, cluster, edits, kinds)


# --------------------------------------------------------------------------- truth

_WORD = re.compile(r"\w+")


def words(text: str, apostrophe: str = "split") -> List[str]:
    """The usual definition: NFKC, lower-case, maximal runs of letters, digits and _ (``\\w+``).

    ``apostrophe`` (the study only): ``split`` (the usual definition), ``delete`` (an apostrophe
    between two letters is deleted: don't -> dont), ``word`` (it stays inside the word).
    """
    text = unicodedata.normalize("NFKC", text).lower()
    if apostrophe == "delete":
        text = re.sub(r"(?<=\w)['\u2019](?=\w)", "", text)
    elif apostrophe == "word":
        return re.findall(r"\w+(?:['\u2019]\w+)*", text)
    return _WORD.findall(text)


def gram_set(text: str, n: int = NGRAM, **kw) -> set:
    w = words(text, **kw)
    if len(w) < n:
        return {tuple(w)} if w else set()
    return set(zip(*[w[i:] for i in range(n)]))


def jaccard(a: set, b: set) -> float:
    if not a or not b:
        return 0.0  # an empty document is a near-duplicate of nothing (as in neardup)
    inter = len(a & b)
    return inter / (len(a) + len(b) - inter)


def planted_pairs(cluster_of: np.ndarray):
    groups: Dict[int, List[int]] = {}
    for i, c in enumerate(cluster_of.tolist()):
        groups.setdefault(c, []).append(i)
    a, b = [], []
    for ms in groups.values():
        for x in range(len(ms)):
            for y in range(x + 1, len(ms)):
                a.append(ms[x])
                b.append(ms[y])
    return np.asarray(a, np.int64), np.asarray(b, np.int64)


def pair_jaccards(texts, a, b, **kw) -> np.ndarray:
    cache: Dict[int, set] = {}

    def g(i):
        s = cache.get(i)
        if s is None:
            s = cache[i] = gram_set(texts[i], **kw)
        return s
    return np.array([jaccard(g(x), g(y)) for x, y in zip(a.tolist(), b.tolist())])


def grade(texts, cluster_of, a, b, j, removed, rep, threshold=THRESHOLD, false_below=FALSE_BELOW) -> dict:
    n = len(texts)
    removed = np.asarray(removed, np.int64)
    rep = np.asarray(rep, np.int64)
    kept = np.ones(n, bool)
    kept[removed] = False
    true = j >= threshold
    residual = true & kept[a] & kept[b]
    lookup = {(int(x), int(y)): float(v) for x, y, v in zip(a, b, j)}
    sims = np.empty(len(removed))
    outside = 0
    for k, (x, y) in enumerate(zip(removed.tolist(), rep.tolist())):
        key = (min(x, y), max(x, y))
        if key in lookup:
            sims[k] = lookup[key]
        else:
            outside += 1
            sims[k] = jaccard(gram_set(texts[x]), gram_set(texts[y])) if y >= 0 else 0.0
    n_true = int(true.sum())
    false = int((sims < false_below).sum())
    return {"true_pairs": n_true, "residual_pairs": int(residual.sum()),
            "residual_share": residual.sum() / n_true if n_true else 0.0,
            "removed": int(len(removed)), "false_removals": false,
            "false_removal_share": false / len(removed) if len(removed) else 0.0,
            "removed_below_threshold": int((sims < threshold).sum()),
            "removed_with_representative_outside_cluster": outside}


def residual_by_edit(corpus: WordCorpus, a, b, j, removed, threshold=THRESHOLD) -> dict:
    """Residual share of the true pairs whose copy got each format edit (or none)."""
    kept = np.ones(len(corpus.texts), bool)
    kept[np.asarray(removed, np.int64)] = False
    out = {}
    true = j >= threshold
    res = true & kept[a] & kept[b]
    names = [n for n, _ in FORMAT_EDITS] + ["none", "mojibake"]
    for name in names:
        sel = np.zeros(len(a), bool)
        for k, (x, y) in enumerate(zip(a.tolist(), b.tolist())):
            ex, ey = corpus.edits[x], corpus.edits[y]
            if name == "none":
                sel[k] = not ex and not ey
            elif name == "mojibake":
                sel[k] = corpus.kind[x] == "mojibake"
            else:
                sel[k] = name in ex or name in ey
        t = true & sel
        out[name] = {"true_pairs": int(t.sum()), "residual_share": float(res[sel].sum() / t.sum()) if t.sum() else None}
    return out


# --------------------------------------------------------------------------- tools

# neardup with other options (this checkout)
VARIANTS = {"neardup-delete": ["--punctuation", "delete"],       # punctuation deleted inside words
            "neardup-keep": ["--punctuation", "keep"],           # symbols and punctuation as tokens
            "neardup-v1": ["--hash-version", "1"],               # the per-byte FNV word hash
            "neardup-recall-0.95": ["--min-recall", "0.95"],     # the defaults before issue 30 (13 x 7)
            "neardup-recall-0.985": ["--min-recall", "0.985"]}   # 18 x 7, the defaults since issue 30


def run_neardup_cli(corpus_path: Path, out: Path, extra: Sequence[str], pythonpath: str) -> dict:
    import pyarrow.parquet as pq
    cmd = [sys.executable, "-m", "neardup", "dedup", str(corpus_path), "--output", str(out),
           "--threshold", str(THRESHOLD), "--id-column", "id", "--quiet", *extra]
    env = dict(os.environ, PYTHONPATH=pythonpath)
    t0 = time.perf_counter()
    subprocess.run(cmd, check=True, env=env)
    seconds = time.perf_counter() - t0
    t = pq.read_table(out / "removed.parquet", columns=["id", "representative"])
    removed = np.array([int(x) for x in t.column("id").to_pylist()], np.int64)
    rep = np.array([int(x) if x is not None else -1 for x in t.column("representative").to_pylist()], np.int64)
    return {"removed": removed, "representative": rep, "seconds": seconds,
            "command": " ".join(["PYTHONPATH=" + pythonpath] + cmd[:1] + cmd[1:])}


def run_peer(tool: str, texts: Sequence[str]) -> dict:
    import peers

    def shingles(text, n=NGRAM):
        w = words(text)
        if len(w) < n:
            return [" ".join(w)] if w else []
        return [" ".join(g) for g in zip(*[w[i:] for i in range(n)])]
    peers.shingles = shingles                                     # the same words as the truth
    peers.shingles_bytes = lambda text, n=NGRAM: [s.encode("utf-8") for s in shingles(text, n)]
    t0 = time.perf_counter()
    res = peers.run_pipeline(tool, texts, THRESHOLD)
    return {"removed": res["removed"], "representative": res["representative"],
            "seconds": time.perf_counter() - t0, "params": res["params"]}


def estimator_error(sig: np.ndarray, a, b, j, low: float = 0.5) -> dict:
    sel = j >= low
    est = (sig[a[sel]] == sig[b[sel]]).mean(axis=1)
    err = est - j[sel]
    expected = np.sqrt(2 / np.pi * j[sel] * (1 - j[sel]) / sig.shape[1])  # E|N(0, J(1 - J)/k)|
    return {"pairs": int(sel.sum()), "mean_abs_error": float(np.abs(err).mean()), "bias": float(err.mean()),
            "expected_mean_abs_error_binomial": float(expected.mean())}


def peer_signatures(tool: str, texts) -> np.ndarray:
    import peers
    shingles = peers.shingles
    if tool == "datasketch":
        from datasketch import MinHash
        return np.stack([m.hashvalues.astype(np.uint32) for m in MinHash.generator(
            [[s.encode() for s in shingles(t)] for t in texts], num_perm=128, seed=peers.SEED)])
    import rensa
    return np.asarray(rensa.RMinHash.digest_matrix_from_token_sets([shingles(t) for t in texts], 128,
                                                                   peers.SEED).to_rows(), np.uint32)


# --------------------------------------------------------------------------- main

def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--docs", type=int, default=30000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--tools", default="neardup,neardup-delete,datasketch,rensa",
                    help="comma-separated: neardup, " + ", ".join(VARIANTS) + ", neardup-base, datasketch, rensa")
    ap.add_argument("--base", default="/work/base/src", help="PYTHONPATH of the pre-change checkout (neardup-base)")
    ap.add_argument("--output", type=Path, default=RESULTS_DIR / "words.json")
    args = ap.parse_args(argv)
    tools = [t for t in args.tools.split(",") if t]

    result = run_header(sys.argv)
    t0 = time.perf_counter()
    corpus = generate(args.docs, args.seed)
    texts = corpus.texts
    gen_s = time.perf_counter() - t0
    a, b = planted_pairs(corpus.cluster_of)
    t0 = time.perf_counter()
    j = pair_jaccards(texts, a, b)
    truth_s = time.perf_counter() - t0
    # unrelated documents: the most similar pair of a sample (boilerplate only, by construction)
    rng = np.random.default_rng(7)
    ua, ub = rng.integers(0, len(texts), 3000), rng.integers(0, len(texts), 3000)
    keep = corpus.cluster_of[ua] != corpus.cluster_of[ub]
    unrelated = pair_jaccards(texts, ua[keep], ub[keep])
    moj = [i for i, k in enumerate(corpus.kind) if k == "mojibake"]
    result["corpus"] = {
        "generator": "bench/words.py generate()", "generator_version": GENERATOR_VERSION,
        "n_docs": len(texts), "seed": args.seed, "generate_s": gen_s, "truth_s": truth_s,
        "copies": int((corpus.cluster_of != np.arange(len(texts))).sum()),
        "mojibake_docs": len(moj), "cyrillic_docs": sum(k == "cyrillic" for k in corpus.kind),
        "mean_doc_chars": float(np.mean([len(t) for t in texts])),
        "planted_pairs": int(len(a)), "true_pairs_at_0.8": int((j >= THRESHOLD).sum()),
        "planted_pair_jaccard_quantiles": np.quantile(j, [0, 0.1, 0.5, 0.9, 1]).round(4).tolist(),
        "max_unrelated_jaccard_in_sample": float(unrelated.max()), "unrelated_sample": int(keep.sum()),
        "format_edit_probabilities": dict(FORMAT_EDITS),
        "truth": "word 5-grams of re.findall(r'\\w+', NFKC(text).lower()), exact Jaccard",
        "false_removal": f"removed with exact J < {FALSE_BELOW} to the representative the tool names",
    }
    print(json.dumps(result["corpus"], indent=1), flush=True)

    runs: Dict[str, dict] = {}
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "words.jsonl"
        with open(path, "w", encoding="utf-8") as f:
            for i, t in enumerate(texts):
                f.write(json.dumps({"id": str(i), "text": t}, ensure_ascii=False) + "\n")
        here = str(Path(__file__).resolve().parent.parent / "src")
        for tool in tools:
            print(f"{tool} ...", flush=True)
            if tool == "neardup":
                r = run_neardup_cli(path, Path(tmp) / tool, [], here)
            elif tool in VARIANTS:
                r = run_neardup_cli(path, Path(tmp) / tool, VARIANTS[tool], here)
            elif tool == "neardup-base":
                r = run_neardup_cli(path, Path(tmp) / tool, [], args.base)
            else:
                r = run_peer(tool, texts)
            g = grade(texts, corpus.cluster_of, a, b, j, r["removed"], r["representative"])
            g["by_edit"] = residual_by_edit(corpus, a, b, j, r["removed"])
            g["seconds"] = r["seconds"]
            for k in ("command", "params"):
                if k in r:
                    g[k] = r[k]
            runs[tool] = g
            print(f"  residual {g['residual_share']:.4f}  false removals {g['false_removal_share']:.4f} "
                  f"({g['false_removals']}/{g['removed']})", flush=True)
    result["runs"] = runs

    # estimator error, k = 128, pairs with exact J >= 0.5
    from neardup.kernels.minhash import MinHasher
    est = {"neardup": estimator_error(MinHasher(num_perm=128).signatures(texts), a, b, j)}
    import peers  # noqa: F401  (its shingles were replaced by run_peer when a peer ran)
    for tool in ("datasketch", "rensa"):
        if tool in tools:
            est[tool] = estimator_error(peer_signatures(tool, texts), a, b, j)
    result["estimator_k128_pairs_J_ge_0.5"] = est

    # the apostrophe study: what an apostrophe between two letters should do
    study = {}
    for rule in ("split", "delete", "word"):
        jr = pair_jaccards(texts, a, b, apostrophe=rule)
        sel = np.array([("apostrophes" in corpus.edits[x] or "apostrophes" in corpus.edits[y])
                        for x, y in zip(a.tolist(), b.tolist())])
        curly = np.array([("punctuation" in corpus.edits[x] or "punctuation" in corpus.edits[y])
                          for x, y in zip(a.tolist(), b.tolist())])
        study[rule] = {"share_ge_0.8_all_planted": float((jr >= THRESHOLD).mean()),
                       "mean_J_all_planted": float(jr.mean()),
                       "mean_J_apostrophes_dropped": float(jr[sel].mean()) if sel.any() else None,
                       "mean_J_punctuation_edited (curly quotes)": float(jr[curly].mean()) if curly.any() else None,
                       "mean_abs_diff_from_usual_J": float(np.abs(jr - j).mean()),
                       "pairs_crossing_0.8_vs_usual": int(((jr >= THRESHOLD) != (j >= THRESHOLD)).sum())}
    result["apostrophe_study"] = study
    write_json(args.output, result)

    print()
    print(f"{'tool':<16} {'residual':>9} {'false rem.':>10} {'removed':>8} {'seconds':>8}")
    for name, g in runs.items():
        print(f"{name:<16} {g['residual_share']:>9.4f} {g['false_removal_share']:>10.4f} {g['removed']:>8} "
              f"{g['seconds']:>8.1f}")
    for name, e in est.items():
        print(f"estimator {name}: mean |est - J| = {e['mean_abs_error']:.4f} over {e['pairs']} pairs "
              f"(binomial expectation {e['expected_mean_abs_error_binomial']:.4f})")
    for rule, s in study.items():
        print(f"apostrophe {rule}: {s}")
    print(f"wrote {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
