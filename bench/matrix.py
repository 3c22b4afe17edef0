"""The outputs of two checkouts over a matrix of runs, compared byte for byte: did a change of the
code's walls change what the tool does?

    git worktree add --detach /tmp/neardup-old OLD_COMMIT
    .venv/bin/python bench/matrix.py --old /tmp/neardup-old            # --new defaults to this checkout

Each scenario runs the command line (``python -m neardup ...``, PYTHONPATH on one tree's ``src``)
or the public API (``neardup.dedup``) the same way in both trees, in fresh folders, and fingerprints
what a user gets: every file of the output folder (stats.json without its seconds), ``index stats``
and ``index query`` of the indexes (without their segment names and times), the API's return
values. The scenarios:

    local             the defaults on a corpus with planted near-duplicates (JSONL, ids)
    ray               the same on the Ray engine (a local instance)
    resume-ray        read on the local engine, then --resume on Ray from the read stage
    resume-local      read on Ray, then --resume on the local engine from the read stage
    formats           CSV, Parquet, gzip JSONL, a folder of text files; --on-error skip with bad
                      records; --output-format parquet; keep longest; verify estimate
    against-exact     an exact index of one half, the other half --against it, --update-index
    against-bloom     the same with a Bloom index
    api               a pandas DataFrame and a list of texts through neardup.dedup

Writes bench/results/matrix.json (``--output``): per scenario, whether the two trees gave the same
fingerprint, and the files that differ.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Dict, List

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import git_state, REPO_DIR, RESULTS_DIR, run_header, write_json  # noqa: E402

DOCS = 3000


def corpus(folder: Path) -> Dict[str, Path]:
    """The inputs every scenario reads, written once (the same bytes for both trees)."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.csv as pcsv
    import pyarrow.parquet as pq

    from neardup.testing.synth import generate_corpus

    folder.mkdir(parents=True, exist_ok=True)
    texts = generate_corpus(DOCS, seed=7).texts
    rows = [{"id": f"doc-{i:05d}", "text": t, "score": float(i % 7)} for i, t in enumerate(texts)]
    half = len(rows) // 2
    paths = {}
    for name, part in (("all", rows), ("old", rows[:half]), ("new", rows[half:])):
        p = folder / f"{name}.jsonl"
        p.write_text("".join(json.dumps(r) + "\n" for r in part))
        paths[name] = p
    fmt = folder / "formats"
    fmt.mkdir(exist_ok=True)
    third = len(rows) // 3
    pcsv.write_csv(pa.Table.from_pylist(rows[:third]), fmt / "a.csv")
    pq.write_table(pa.Table.from_pylist(rows[third:2 * third]), fmt / "b.parquet")
    with gzip.open(fmt / "c.jsonl.gz", "wt") as f:
        for r in rows[2 * third:2 * third + 300]:
            f.write(json.dumps(r) + "\n")
        f.write("{not json\n")
        f.write(json.dumps({"id": "no-text"}) + "\n")
    texts_dir = fmt / "texts"
    texts_dir.mkdir(exist_ok=True)
    for r in rows[2 * third + 300:2 * third + 500]:
        (texts_dir / f"{r['id']}.txt").write_text(r["text"])
    paths["formats"] = fmt
    rng = np.random.default_rng(3)
    paths["dataframe_order"] = rng.permutation(400).tolist()
    return paths


def fingerprint_folder(folder: Path) -> Dict[str, str]:
    """sha256 of every file of an output folder (stats.json without its seconds; the work dir
    and the folder's own marker and lock left out: they are neardup's bookkeeping)."""
    out = {}
    for p in sorted(folder.rglob("*")):
        rel = p.relative_to(folder).as_posix()
        if not p.is_file() or rel.startswith((".neardup-work", ".neardup")) or "/.neardup" in rel:
            continue
        data = p.read_bytes()
        if rel == "stats.json":
            d = json.loads(data)
            d.pop("seconds", None)
            if "index_update" in d:
                d["index_update"].pop("seconds", None)
            data = json.dumps(d, sort_keys=True).encode()
        out[rel] = hashlib.sha256(data).hexdigest()
    return out


def index_fingerprint(neardup, index: Path, query: Path) -> Dict[str, str]:
    """``index stats`` (without segment names, sizes on disk and times) and ``index query``."""
    stats = json.loads(neardup("index", "stats", index).stdout)
    for key in ("segments_detail", "segment_names", "created", "updated", "bytes", "bytes_per_document"):
        stats.pop(key, None)
    q = neardup("index", "query", index, query).stdout
    return {"index stats": hashlib.sha256(json.dumps(stats, sort_keys=True).encode()).hexdigest(),
            "index query": hashlib.sha256(q.encode()).hexdigest()}


def scenarios(tree: Path, data: Dict[str, Path], scratch: Path) -> Dict[str, Dict[str, str]]:
    env = dict(os.environ, PYTHONPATH=str(tree / "src"))
    env.pop("NEARDUP_JSONL_SCANNER", None)

    def neardup(*args, check=True):
        r = subprocess.run([sys.executable, "-m", "neardup", *map(str, args)], env=env, capture_output=True,
                           text=True, timeout=1800)
        if check and r.returncode != 0:
            raise SystemExit(f"{tree}: neardup {' '.join(map(str, args))} failed:\n{r.stderr[-3000:]}")
        return r

    def out(name: str) -> Path:
        p = scratch / name
        shutil.rmtree(p, ignore_errors=True)
        return p

    found: Dict[str, Dict[str, str]] = {}
    o = out("local")
    neardup("dedup", data["all"], "-o", o, "-q")
    found["local"] = fingerprint_folder(o)
    o = out("ray")
    neardup("dedup", data["all"], "-o", o, "-q", "--engine", "ray", "--workers", "2")
    found["ray"] = fingerprint_folder(o)
    for name, first, then in (("resume-ray", "local", "ray"), ("resume-local", "ray", "local")):
        o, w = out(name), out(name + "-work")
        neardup("dedup", data["all"], "-o", o, "-q", "--engine", first, "--workers", "2", "--work-dir", w)
        state = json.loads((w / "state.json").read_text())
        state["done"] = {"read": state["done"]["read"]}  # as if interrupted once the read stage was done
        (w / "state.json").write_text(json.dumps(state))
        neardup("dedup", data["all"], "-o", o, "-q", "--engine", then, "--workers", "2", "--work-dir", w, "--resume")
        found[name] = fingerprint_folder(o)
    o = out("formats")
    neardup("dedup", data["formats"], "-o", o, "-q", "--on-error", "skip", "--output-format", "parquet",
            "--keep", "longest", "--verify", "estimate", "--id-column", "")
    found["formats"] = fingerprint_folder(o)
    for kind in ("exact", "bloom"):
        idx, o = out(f"index-{kind}"), out(f"against-{kind}")
        neardup("index", "add", idx, data["old"], "--kind", kind)
        neardup("dedup", data["new"], "-o", o, "-q", "--against", idx, *(["--update-index"] if kind == "exact" else []))
        f = fingerprint_folder(o)
        f.update(index_fingerprint(neardup, idx, data["new"]))
        found[f"against-{kind}"] = f
    api = out("api")
    api.mkdir(parents=True)
    code = f"""
import json, hashlib, sys
import pandas as pd, pyarrow as pa
import neardup
rows = [json.loads(l) for l in open({str(data['all'])!r})][:400]
order = {data['dataframe_order']!r}
df = pd.DataFrame([rows[i] for i in order], index=[f"r{{i}}" for i in order])
r = neardup.dedup(df)
h = hashlib.sha256()
h.update(r.kept.to_json().encode()); h.update(str(r.removed.to_pylist()).encode())
t = neardup.dedup([x["text"] for x in rows])
h.update(json.dumps(t.kept).encode()); h.update(str(t.removed.to_pylist()).encode())
print(h.hexdigest())
"""
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=900)
    if r.returncode != 0:
        raise SystemExit(f"{tree}: the API scenario failed:\n{r.stderr[-3000:]}")
    found["api"] = {"dedup(DataFrame), dedup(texts)": r.stdout.strip()}
    return found


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--old", required=True, help="a checkout of the older version (its src/ is used)")
    ap.add_argument("--new", default=str(REPO_DIR), help="the newer version (default: this checkout)")
    ap.add_argument("--output", default=str(RESULTS_DIR / "matrix.json"))
    args = ap.parse_args(argv)
    trees = {"old": Path(args.old).resolve(), "new": Path(args.new).resolve()}
    result = run_header(sys.argv)
    result["trees"] = {k: str(v) for k, v in trees.items()}
    result["commits"] = {k: git_state(v)["commit"] for k, v in trees.items()}
    with tempfile.TemporaryDirectory(prefix="neardup-matrix-") as tmp:
        data = corpus(Path(tmp) / "data")
        got = {}
        for name, tree in trees.items():  # in the same folder: paths are part of what a run writes
            got[name] = scenarios(tree, data, Path(tmp) / "run")
            shutil.rmtree(Path(tmp) / "run")
    table: Dict[str, dict] = {}
    for scenario in got["old"]:
        a, b = got["old"][scenario], got["new"].get(scenario, {})
        differ: List[str] = sorted(k for k in set(a) | set(b) if a.get(k) != b.get(k))
        table[scenario] = {"same": not differ, "files": len(a), "differ": differ}
        print(f"{scenario:>14}: {'same bytes' if not differ else 'DIFFERENT: ' + ', '.join(differ)} "
              f"({len(a)} files or answers)")
    result["scenarios"] = table
    result["all_same"] = all(v["same"] for v in table.values())
    write_json(Path(args.output), result)
    print(f"all the same: {result['all_same']}; written to {args.output}")
    return 0 if result["all_same"] else 1


if __name__ == "__main__":
    sys.exit(main())
