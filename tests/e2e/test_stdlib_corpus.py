"""A real corpus: the .py files of the running Python's standard library (on every machine).

The dedup result is checked against exact all-pairs Jaccard, computed independently in plain
Python (the tokenizer's Python twin and Python sets), on a sample of files.
"""

from __future__ import annotations

import itertools
import json
import os
import random
import sysconfig
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from neardup.cli import main
from neardup.kernels.shingles_python import shingles_python

pytestmark = pytest.mark.slow  # a large corpus (the standard library) against exact all-pairs Jaccard

STDLIB = sysconfig.get_paths()["stdlib"]


def stdlib_inputs():
    inputs = [os.path.join(STDLIB, "*.py")]
    for entry in sorted(os.listdir(STDLIB)):
        full = os.path.join(STDLIB, entry)
        if os.path.isdir(full) and entry not in ("site-packages", "__pycache__") and not entry.startswith("."):
            if any(p.endswith(".py") for _, _, files in os.walk(full) for p in files):
                inputs.append(os.path.join(full, "**", "*.py"))
    return inputs


@pytest.fixture(scope="module")
def stdlib_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("stdlib") / "out"
    code = main(["dedup", *stdlib_inputs(), "--output", str(out), "--on-error", "skip", "--quiet",
                 "--threshold", "0.8"])
    assert code == 0
    return out


def test_stdlib_counts_add_up(stdlib_run):
    stats = json.loads((stdlib_run / "stats.json").read_text())
    c = stats["counts"]
    n_files = sum(len(list(Path(STDLIB).glob(pattern.replace(STDLIB + os.sep, ""))))
                  for pattern in stdlib_inputs())
    # the standard library's deliberately mis-encoded test files: skipped and counted (a walk)
    assert c["input"] + stats["files"]["skipped_binary"] == n_files and stats["files"]["skipped_binary"] > 0
    assert c["input"] == c["kept"] + c["removed"] + c["rejected"]
    removed = pq.read_table(stdlib_run / "removed.parquet").to_pylist()
    rejected = pq.read_table(stdlib_run / "rejected.parquet").to_pylist()
    kept = [str(p.relative_to(stdlib_run / "kept")) for p in (stdlib_run / "kept").rglob("*.py")]
    assert len(kept) == c["kept"] and len(removed) == c["removed"] and len(rejected) == c["rejected"]
    # the only unreadable files are the standard library's deliberately mis-encoded test files
    for r in rejected:
        assert "UTF-8" in r["reason"], r
    # the standard library has near-duplicate files (e.g. lib2to3/test data, idlelib, test fixtures)
    assert c["removed"] > 0 and c["clusters"] > 0


def test_stdlib_against_exact_all_pairs(stdlib_run):
    stats = json.loads((stdlib_run / "stats.json").read_text())
    threshold = stats["params"]["threshold"]
    removed = pq.read_table(stdlib_run / "removed.parquet").to_pylist()
    clusters = pq.read_table(stdlib_run / "clusters.parquet").to_pylist()
    status = {}
    for p in (stdlib_run / "kept").rglob("*.py"):
        status[str(p)] = "kept"
    def full(i):  # ids are paths below the inputs' common folder, the standard library's
        return os.path.join(STDLIB, i)

    removed_ids = {full(r["id"]) for r in removed}
    in_clusters = sorted({full(r["id"]) for r in clusters})
    rng = random.Random(1)
    all_files = []
    for pattern in stdlib_inputs():
        all_files += [str(p) for p in Path(STDLIB).glob(pattern.replace(STDLIB + os.sep, ""))]
    rejected = {r["source"] for r in pq.read_table(stdlib_run / "rejected.parquet").to_pylist()}
    # every input of the run (over 1,000 files: stats.json keeps the first 1,000, files.json all)
    inputs = json.loads((stdlib_run / "files.json").read_text())["inputs"] if "lists" in stats else stats["inputs"]
    rejected |= {i["name"] for i in inputs if i.get("skipped")}
    small = [f for f in all_files if os.path.getsize(f) < 40_000 and f not in rejected]
    sample = sorted(set(rng.sample([f for f in in_clusters if f in set(small)], k=min(120, len(in_clusters)))) |
                    set(rng.sample(small, k=150)))

    def shingle_set(path):
        with open(path, encoding="utf-8") as f:
            return set(shingles_python(f.read(), ngram=stats["params"]["ngram"]))

    sets = {f: shingle_set(f) for f in sample}

    def jaccard(a, b):
        if not a or not b:
            return 0.0
        return len(a & b) / len(a | b)

    # 1. every reported similarity is the exact Jaccard of the two files
    checked = 0
    for r in removed:
        if full(r["id"]) in sets and full(r["representative"]) in sets:
            assert abs(r["similarity"] - jaccard(sets[full(r["id"])], sets[full(r["representative"])])) < 1e-9
            assert r["similarity"] >= threshold
            checked += 1
    assert checked >= 10
    # 2. near-duplicate pairs of the sample rarely survive together (LSH finds a pair at J = 0.8
    #    with probability >= 0.9, and at J >= 0.9 with probability > 0.999)
    true_pairs = both_kept = 0
    for a, b in itertools.combinations(sample, 2):
        j = jaccard(sets[a], sets[b])
        if j >= threshold:
            true_pairs += 1
            if a not in removed_ids and b not in removed_ids:
                both_kept += 1
                assert j < 0.9, (a, b, j)
    assert true_pairs >= 10
    assert both_kept <= max(1, 0.1 * true_pairs)
