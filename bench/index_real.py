"""The two index tiers on a real corpus cut in two: the older part indexed, the newer part
deduplicated against it (``neardup dedup NEW --against INDEX``), exact tier, Bloom tier and an
unverified LSH side by side.

    .venv/bin/python bench/index_real.py                      # writes bench/results/index_real.json

The corpus is text nobody here wrote, found on this machine: the files under /usr/share/doc
(changelogs, copyright files, READMEs; .gz decompressed), the manual pages under /usr/share/man
(zcat), and the Python sources of the standard library (/usr/lib/python3*/) and of the installed
packages (``--site``, default the site-packages of this interpreter). A document is one file,
decoded as UTF-8 (bad bytes replaced); files of fewer than ``--min-words`` words or more than
``--max-bytes`` bytes are left out. The older half by modification time (ties: the path) is
indexed, the newer half is deduplicated against it.

Truth: every (older, newer) pair with exact word-5-gram Jaccard (64-bit shingle sets, neardup's
shingling) >= 0.75, found among the candidates of a high-recall LSH (32 bands of 4 rows over the
128-value signatures: P(candidate) >= 1 - 4e-6 at Jaccard 0.75) and verified exactly.

Graded, per tier:
- residual: the true pairs at >= 0.8 whose newer document was not removed for the index, as a
  share of all of them (removals inside the newer part, for another newer document, are counted
  apart and do not resolve a pair here);
- false removals: newer documents removed for the index that have no older document at >= 0.75
  (and at >= 0.8), as a count and a share of the newer documents;
- bytes per document of the index.
The unverified LSH is what a Bloom index answers without its extra false positives: a newer
document is removed when one of its 13 band keys (13 x 7 rows, the index's) is a band key of an
older document.
"""

from __future__ import annotations

import argparse
import glob
import gzip
import json
import os
import site
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import RESULTS_DIR, run_header, write_json  # noqa: E402

import pyarrow.parquet as pq  # noqa: E402

import neardup  # noqa: E402
from neardup.kernels.bands import band_keys  # noqa: E402
from neardup.cli import main as cli  # noqa: E402
from neardup.index import Index  # noqa: E402
from neardup.kernels.verify import exact_jaccard  # noqa: E402


def files(site_dir: str):
    out = []
    for root in ("/usr/share/doc", "/usr/share/man"):
        for dirpath, _, names in os.walk(root):
            out += [os.path.join(dirpath, n) for n in names]
    out += glob.glob("/usr/lib/python3*/**/*.py", recursive=True)
    out += glob.glob(os.path.join(site_dir, "**", "*.py"), recursive=True)
    return sorted(set(p for p in out if os.path.isfile(p) and not os.path.islink(p)))


def read(path: str, max_bytes: int):
    try:
        if os.path.getsize(path) > max_bytes:
            return None
        with open(path, "rb") as f:
            raw = f.read()
        if path.endswith(".gz"):
            raw = gzip.decompress(raw)
        if len(raw) > max_bytes or b"\0" in raw[:4096]:
            return None
        return raw.decode("utf-8", "replace")
    except (OSError, EOFError, gzip.BadGzipFile):
        return None


def truth_pairs(sigs, n_old, offsets, sets, floor=0.75):
    """(old, new, Jaccard) of every cross pair at >= floor, from a 32 x 4 LSH's candidates."""
    keys = band_keys(sigs, 32, 4, 7)
    n = len(keys)
    empty = np.all(sigs == np.uint32(0xFFFFFFFF), axis=1)
    doc = np.repeat(np.arange(n), 32)
    k = keys.ravel()
    keep = ~np.repeat(empty, 32)
    doc, k = doc[keep], k[keep]
    order = np.lexsort((doc, k))
    doc, k = doc[order], k[order]
    starts = np.flatnonzero(np.r_[True, k[1:] != k[:-1]])
    ends = np.r_[starts[1:], len(k)]
    pairs = set()
    for s, e in zip(starts.tolist(), ends.tolist()):
        if e - s < 2:
            continue
        members = doc[s:e]
        old = members[members < n_old]
        new = members[members >= n_old]
        if len(old) and len(new):
            for a in old.tolist():
                for b in new.tolist():
                    pairs.add((a, b))
    if not pairs:
        return np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0)
    p = np.array(sorted(pairs), dtype=np.int64)
    j = exact_jaccard(offsets, sets, p[:, 0], p[:, 1])
    ok = j >= floor
    return p[ok, 0], p[ok, 1], j[ok]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--site", default=site.getsitepackages()[0])
    ap.add_argument("--min-words", type=int, default=50)
    ap.add_argument("--max-bytes", type=int, default=200_000)
    ap.add_argument("--output", default=str(RESULTS_DIR / "index_real.json"))
    args = ap.parse_args(argv)
    result = run_header(sys.argv)
    t0 = time.perf_counter()
    docs = []
    for p in files(args.site):
        text = read(p, args.max_bytes)
        if text is not None and len(text.split()) >= args.min_words:
            docs.append((os.stat(p).st_mtime, p, text))
    docs.sort()
    n = len(docs)
    n_old = n // 2
    texts = [d[2] for d in docs]
    ids = [d[1] for d in docs]
    corpus = {"documents": n, "older": n_old, "newer": n - n_old, "bytes": sum(len(t.encode()) for t in texts),
              "by_root": {r: sum(1 for i in ids if i.startswith(r)) for r in
                          ("/usr/share/doc", "/usr/share/man", "/usr/lib/python3", args.site)},
              "older_mtime_max": time.strftime("%Y-%m-%d", time.gmtime(docs[n_old - 1][0])),
              "newer_mtime_min": time.strftime("%Y-%m-%d", time.gmtime(docs[n_old][0])),
              "read_seconds": round(time.perf_counter() - t0, 1)}
    print(json.dumps(corpus), file=sys.stderr, flush=True)

    cfg = neardup.Config().resolved()
    hasher = neardup.MinHasher.from_config(cfg)
    sigs, offsets, sets = hasher.signatures_and_sets(texts)
    old, new, jac = truth_pairs(sigs, n_old, offsets, sets)
    strict = jac >= cfg.threshold
    has_075 = np.zeros(n, bool)
    has_075[new] = True
    has_08 = np.zeros(n, bool)
    has_08[new[strict]] = True
    truth = {"pairs_at_0.75": int(len(old)), "pairs_at_0.8": int(strict.sum()),
             "newer_with_an_older_at_0.8": int(has_08.sum()), "newer_with_an_older_at_0.75": int(has_075.sum())}
    print(json.dumps(truth), file=sys.stderr, flush=True)

    tmp = Path(tempfile.mkdtemp(prefix="neardup-index-real-"))
    for name, part in (("old", range(0, n_old)), ("new", range(n_old, n))):
        with open(tmp / f"{name}.jsonl", "w") as f:
            for i in part:
                f.write(json.dumps({"id": str(i), "text": texts[i]}) + "\n")

    def grade(removed_new: np.ndarray) -> dict:
        """removed_new: bool[n], the newer documents removed for the index."""
        pairs_08 = int(strict.sum())
        residual = int(np.sum(~removed_new[new[strict]]))
        newer = n - n_old
        false_075 = int(np.sum(removed_new & ~has_075))
        false_08 = int(np.sum(removed_new & ~has_08))
        return {"removed_for_the_index": int(removed_new.sum()),
                "residual_pairs": residual, "residual_share": round(residual / pairs_08, 5) if pairs_08 else None,
                "false_removals_below_0.75": false_075, "false_removal_share_below_0.75": round(false_075 / newer, 5),
                "false_removals_below_0.8": false_08, "false_removal_share_below_0.8": round(false_08 / newer, 5)}

    out = {"corpus": corpus, "truth": truth}
    for kind in ("exact", "bloom"):
        idx = str(tmp / f"{kind}.ndx")
        t1 = time.perf_counter()
        assert cli(["index", "add", idx, str(tmp / "old.jsonl"), "--id-column", "id", "--kind", kind]) == 0
        add_s = time.perf_counter() - t1
        stats = Index(idx).stats()
        t1 = time.perf_counter()
        assert cli(["dedup", str(tmp / "new.jsonl"), "-o", str(tmp / f"out-{kind}"), "--against", idx,
                    "--id-column", "id", "--quiet"]) == 0
        run_s = time.perf_counter() - t1
        removed = pq.read_table(tmp / f"out-{kind}" / "removed.parquet",
                                columns=["id", "representative_source"]).to_pylist()
        gone = np.zeros(n, bool)
        against = np.zeros(n, bool)
        for r in removed:
            gone[int(r["id"])] = True
            against[int(r["id"])] = r["representative_source"] is not None
        g = grade(against)
        g["removed_inside_the_newer_part"] = int(np.sum(gone & ~against))
        g.update({"bytes_per_document": stats["bytes_per_document"], "add_seconds": round(add_s, 2),
                  "dedup_against_seconds": round(run_s, 2)})
        if kind == "bloom":
            g["extra_false_positive_rate"] = stats["extra_false_positive_rate"]
        out[kind] = g
        print(kind, json.dumps(g), file=sys.stderr, flush=True)

    # the unverified LSH: a newer document sharing a band key (the index's 13 x 7) with an older one
    keys = band_keys(sigs, cfg.bands, cfg.rows, cfg.seed)
    nonempty = ~np.all(sigs == np.uint32(0xFFFFFFFF), axis=1)
    old_keys = np.unique(keys[:n_old][nonempty[:n_old]].ravel())
    lsh = np.zeros(n, bool)
    lsh[n_old:] = np.isin(keys[n_old:], old_keys).any(axis=1) & nonempty[n_old:]
    out["unverified_lsh"] = grade(lsh)
    bloom_removed = np.zeros(n, bool)
    for r in pq.read_table(tmp / "out-bloom" / "removed.parquet", columns=["id", "representative_source"]).to_pylist():
        bloom_removed[int(r["id"])] = r["representative_source"] is not None
    out["unverified_lsh"]["bloom_answers_equal_lsh"] = bool(np.array_equal(bloom_removed, lsh))
    out["unverified_lsh"]["bloom_yes_not_lsh"] = int(np.sum(bloom_removed & ~lsh))
    result["results"] = out
    result["load_average_at_end"] = list(os.getloadavg())
    write_json(Path(args.output), result)
    print(json.dumps(out, indent=2))
    import shutil
    shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
