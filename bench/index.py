"""The persistent index: add rate, query latency, batch match rate, bytes per document, and the
verification error of what the index stores. Folder (embedded) and Redis backends.

    .venv/bin/python bench/index.py                                   # 100k indexed, 10k held out
    .venv/bin/python bench/index.py --index-docs 20000 --query-docs 2000 --latency-queries 300

The corpus is bench/data/synth_{N+Q}_s0.jsonl (generated once): the first N documents are added
to the index in 10 adds (so 10 segments, then compacted), the last Q are the "new" documents:
copies of indexed originals among them are the planted near-duplicates. A redis-server is
started on a free loopback port with append-only persistence (appendfsync everysec).

Measured:
- read stage: reading the JSONL and hashing (signatures + shingle hashes), no index: the work
  ``neardup dedup``'s read stage does, the reference for the add rate;
- add (folder, Redis): ``Index.add(path)`` from the JSONL, docs/s; and ``add_arrays`` of
  pre-hashed documents (the storage's own cost, what ``--update-index`` pays);
- query latency: ``Index.query([text])`` one text at a time, p50 / p99 / max, before and after
  compaction (folder) and on Redis;
- match rate: ``Index.match`` over the Q pre-hashed documents in one batch (what
  ``dedup --against`` pays on top of its own read stage);
- recall: share of planted pairs with Jaccard >= 0.8 (index original, new copy) found;
- stored bytes per document, per file; fingerprint vs 64-bit exact Jaccard on every verified
  pair, and the signature estimate's error on the same pairs.

Scale (``--scale-docs N``, writes ``bench/results/index_scale_<N>.json``): an exact and a Bloom
index of N documents side by side, then 100k new documents against each::

    nice -n 19 .venv/bin/python bench/index.py --scale-docs 10000000     # 10M (hours on 2 cores)
    .venv/bin/python bench/index.py --scale-docs 1000000 --scale-dir /big/disk

The N documents are the 1M synthetic corpus ``bench/data/synth_1000000_s0.jsonl`` repeated as
``bench/scale.py`` builds its 10M corpus: shard k is the corpus with every letter mapped through
the fixed permutation of shard k (same near-duplicate structure, unrelated across shards), built
in memory, never written out. Shard k is one add (``neardup index add`` of 1M documents) to each
index; each batch of texts is hashed once (``Index.hash_texts``, the read stage's work, timed
apart) and stored into both (``add_arrays``, timed per tier), so a tier's add rate is N / (hash
+ its store). The 100k new documents (``new.jsonl``): half are documents of shard 0 with their
first word dropped (near-duplicates of indexed ones, Jaccard ~0.99), half are documents of an
unindexed shard (unrelated). Measured per tier: add docs/s, bytes per document, ``query([text])``
p50/p99, ``neardup dedup new.jsonl --against INDEX`` in a subprocess (wall, documents/s, peak
memory; how many of each half it removed), ``neardup index compact`` in a subprocess (peak
memory; a Bloom index is not compacted: refused).
"""

from __future__ import annotations

import argparse
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import RESULTS_DIR, ensure_corpus, load_truth, read_jsonl_texts, run_header, write_json  # noqa: E402

import pyarrow as pa  # noqa: E402

import neardup  # noqa: E402
from neardup.kernels.bands import band_keys  # noqa: E402
from neardup.index import Index  # noqa: E402
from neardup.kernels.lookup import fingerprints  # noqa: E402
from neardup.kernels.verify import estimated_jaccard, exact_jaccard  # noqa: E402


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_redis(folder: str):
    import redis
    port = free_port()
    proc = subprocess.Popen([shutil.which("redis-server"), "--port", str(port), "--bind", "127.0.0.1", "--dir", folder,
                             "--appendonly", "yes", "--appendfsync", "everysec", "--save", "",
                             "--daemonize", "no"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    client = redis.Redis(port=port)
    for _ in range(400):
        try:
            client.ping()
            return proc, port
        except redis.exceptions.ConnectionError:
            time.sleep(0.05)
    raise RuntimeError("redis-server did not start")


def percentiles(lat):
    lat = np.asarray(lat) * 1000
    return {"p50_ms": round(float(np.percentile(lat, 50)), 3), "p99_ms": round(float(np.percentile(lat, 99)), 3),
            "max_ms": round(float(lat.max()), 3), "queries": len(lat)}


def latency(idx: Index, texts, n: int):
    idx.query(texts[:5])  # warm: readers opened, pages touched
    lat = []
    for t in texts[:n]:
        t0 = time.perf_counter()
        idx.query([t])
        lat.append(time.perf_counter() - t0)
    return percentiles(lat)


def add_in_parts(idx: Index, path: str, parts: int, n: int, tmp: str):
    """Adds the first n lines of path in `parts` adds; returns seconds (reading included)."""
    lines = open(path, "rb").read().split(b"\n")[:n]
    step = (n + parts - 1) // parts
    files = []
    for p in range(parts):
        f = os.path.join(tmp, f"part{p:02d}.jsonl")
        with open(f, "wb") as out:
            out.write(b"\n".join(lines[p * step:(p + 1) * step]) + b"\n")
        files.append(f)
    t0, c0 = time.perf_counter(), time.process_time()
    for p, f in enumerate(files):
        idx.add(Path(f), name=f"part{p:02d}")
    return time.perf_counter() - t0, time.process_time() - c0, files


def _log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def _child_env() -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(Path(__file__).resolve().parent.parent / "src"),
                                         env.get("PYTHONPATH", "")])
    return env


MEASURE_ORDER = ("bloom", "exact")


def scale(args, partial: str) -> dict:
    """An exact and a Bloom index of ``args.scale_docs`` documents; see the module's docstring."""
    from common import run_measured
    from scale import letter_table

    N, NEW = args.scale_docs, args.new_docs
    result = run_header(sys.argv)
    source = ensure_corpus(1_000_000, seed=0)
    texts, _ = read_jsonl_texts(Path(source["path"]))
    root = Path(tempfile.mkdtemp(prefix="neardup-index-scale-", dir=args.scale_dir))
    result["scale_dir"] = str(root)
    result["disk_free_bytes_at_start"] = shutil.disk_usage(root).free
    out = {"index_docs": N, "new_docs": NEW, "source": source["path"]}
    tiers = {"exact": Index(str(root / "exact.ndx"), kind="exact"),
             "bloom": Index(str(root / "bloom.ndx"), kind="bloom")}
    warm = Index(str(root / "warm.ndx"), kind="bloom")  # compile the kernels before timing
    warm.add(texts[:300], name="w")
    warm.query(texts[:3])
    Index(str(root / "warm2.ndx")).add(texts[:300], name="w")
    hash_s = 0.0
    store_s = {k: 0.0 for k in tiers}
    batch = 50_000
    done = 0
    try:
        for k in range((N + len(texts) - 1) // len(texts)):
            table = letter_table(k)
            writers = {}
            for name, idx in tiers.items():
                writers[name] = idx.writer()
                writers[name].__enter__()
            take = min(len(texts), N - done)
            for start in range(0, take, batch):
                stop = min(take, start + batch)
                chunk = [t.encode().translate(table).decode() for t in texts[start:stop]]
                ids = [f"{k}-{i}" for i in range(start, stop)]
                t0 = time.perf_counter()
                h = tiers["exact"].hash_texts(chunk)
                hash_s += time.perf_counter() - t0
                t0 = time.perf_counter()
                writers["exact"].add_arrays(h["keys"], ids, f"shard{k}", shingles=(h["fp_offsets"], h["fp"]))
                store_s["exact"] += time.perf_counter() - t0
                t0 = time.perf_counter()
                writers["bloom"].add_arrays(h["keys"], ids, f"shard{k}", signatures=h["signatures"])
                store_s["bloom"] += time.perf_counter() - t0
            for name, w in writers.items():
                t0 = time.perf_counter()
                w.__exit__(None, None, None)
                store_s[name] += time.perf_counter() - t0
            done += take
            out["adds"] = {"documents": done, "hash_seconds": round(hash_s, 1),
                           "store_seconds": {n: round(v, 1) for n, v in store_s.items()}}
            result["results"] = out
            write_json(Path(partial), result)
            _log(f"shard {k}: {done} documents; hash {hash_s:.0f} s, store exact {store_s['exact']:.0f} s, "
                 f"bloom {store_s['bloom']:.0f} s; free {shutil.disk_usage(root).free / 1e9:.1f} GB")

        # the new documents: near-duplicates of shard 0 (first word dropped), and unrelated ones
        half = NEW // 2
        other = letter_table(997)
        new_path = root / "new.jsonl"
        import json
        with open(new_path, "w") as f:
            for i in range(half):
                f.write(json.dumps({"id": f"near{i}", "text": texts[i].split(" ", 1)[1]}) + "\n")
            for i in range(NEW - half):
                f.write(json.dumps({"id": f"new{i}", "text": texts[i].encode().translate(other).decode()}) + "\n")
        near_indexed = min(half, N)
        queries = [texts[i].split(" ", 1)[1] for i in range(args.latency_queries)]
        for name in MEASURE_ORDER:  # the Bloom tier first: its steps are short, the exact tier's long
            idx = tiers[name]
            stats = idx.stats()
            r = {"add_docs_per_s": round(N / (hash_s + store_s[name])), "hash_seconds": round(hash_s, 1),
                 "store_seconds": round(store_s[name], 1),
                 "store_docs_per_s": round(N / store_s[name]), "segments": stats["segments"],
                 "bytes": stats["bytes"], "bytes_per_document": stats["bytes_per_document"],
                 "bytes_per_document_by_file": stats["bytes_per_document_by_file"]}
            if name == "bloom":
                r["false_positive_rate"] = stats["false_positive_rate"]
                r["extra_false_positive_rate"] = stats["extra_false_positive_rate"]
            fresh = Index(str(root / f"{name}.ndx"))
            t0 = time.perf_counter()
            fresh.query(queries[:1])
            r["first_query_seconds"] = round(time.perf_counter() - t0, 3)  # maps and checks the files
            r["query_latency"] = latency(fresh, queries, args.latency_queries)
            _log(f"{name}: {r}")
            run = run_measured([sys.executable, "-m", "neardup", "dedup", str(new_path), "-o",
                                str(root / f"out-{name}"), "--against", str(root / f"{name}.ndx"), "--quiet"],
                               env=_child_env())
            removed = against_ids(root / f"out-{name}" / "removed.parquet") if run["returncode"] == 0 else []
            near = sum(1 for i in removed if i.startswith("near"))
            r["dedup_against"] = {
                "command": run["command"], "returncode": run["returncode"], "wall_s": round(run["wall_s"], 2),
                "docs_per_s": round(NEW / run["wall_s"]), "peak_memory_bytes": run["peak_memory_bytes"],
                "cpu_s": round((run["cpu_user_s"] or 0) + (run["cpu_sys_s"] or 0), 1),
                "removed_near_duplicates": near, "near_duplicates_indexed": near_indexed,
                "removed_unrelated": len(removed) - near, "unrelated": NEW - half,
                "stderr_tail": run["stderr_tail"][-500:]}
            _log(f"{name} dedup --against: {r['dedup_against']}")
            shutil.rmtree(root / f"out-{name}", ignore_errors=True)
            out[name] = r
            result["results"] = out
            write_json(Path(partial), result)
        for name in MEASURE_ORDER:  # compaction last: the longest step at scale
            r = out[name]
            run = run_measured([sys.executable, "-m", "neardup", "index", "compact", str(root / f"{name}.ndx")],
                               env=_child_env())
            r["compact"] = {"returncode": run["returncode"], "wall_s": round(run["wall_s"], 2),
                            "peak_memory_bytes": run["peak_memory_bytes"],
                            "stderr_tail": run["stderr_tail"][-300:]}
            if run["returncode"] == 0:
                r["compact"]["segments_after"] = Index(str(root / f"{name}.ndx")).stats()["segments"]
            _log(f"{name} compact: {r['compact']}")
            out[name] = r
            result["results"] = out
            write_json(Path(partial), result)  # what is measured so far, if a later step fails
    finally:
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)
    result["load_average_at_end"] = list(os.getloadavg())
    result["results"] = out
    return result


def against_ids(path):
    """Ids of the documents removed for an indexed one (not for another new document)."""
    import pyarrow.parquet as pq
    rows = pq.read_table(path, columns=["id", "representative_source"]).to_pylist()
    return [r["id"] for r in rows if r["representative_source"] is not None]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--index-docs", type=int, default=100_000)
    ap.add_argument("--query-docs", type=int, default=10_000)
    ap.add_argument("--latency-queries", type=int, default=1000)
    ap.add_argument("--parts", type=int, default=10)
    ap.add_argument("--no-redis", action="store_true")
    ap.add_argument("--output", default=None, help="default: bench/results/index.json, or "
                                                   "index_scale_<N>.json with --scale-docs")
    ap.add_argument("--scale-docs", type=int, default=None,
                    help="the scale run: an exact and a Bloom index of this many documents")
    ap.add_argument("--new-docs", type=int, default=100_000, help="scale run: documents deduplicated against them")
    ap.add_argument("--scale-dir", default=None, help="scale run: where the indexes go (default: the temp folder)")
    ap.add_argument("--keep", action="store_true", help="scale run: keep the indexes")
    args = ap.parse_args(argv)
    if args.scale_docs:
        target = Path(args.output or RESULTS_DIR / f"index_scale_{args.scale_docs}.json")
        r = scale(args, str(target.with_suffix(".partial.json")))
        write_json(target, r)
        target.with_suffix(".partial.json").unlink(missing_ok=True)
        import json
        print(json.dumps(r["results"], indent=2))
        return
    args.output = args.output or str(RESULTS_DIR / "index.json")
    N, Q = args.index_docs, args.query_docs
    result = run_header(sys.argv)
    corpus = ensure_corpus(N + Q, seed=0)
    result["corpus"] = corpus
    texts, _ = read_jsonl_texts(Path(corpus["path"]))
    truth = load_truth(Path(corpus["truth"]))
    cluster = np.asarray(truth["cluster_of"])
    new_texts = texts[N:N + Q]
    tmp = tempfile.mkdtemp(prefix="neardup-bench-index-")
    out = {"index_docs": N, "query_docs": Q}
    try:
        cfg = neardup.Config()
        # warm the kernels (compilation is not what we measure)
        warm = Index(os.path.join(tmp, "warm"))
        warm.add(texts[:200], name="w")
        warm.query(texts[:3])

        # ---- the read stage's work, for reference
        from neardup import io as nio
        hasher = neardup.MinHasher.from_config(cfg.resolved())
        t0, c0 = time.perf_counter(), time.process_time()
        src = nio.discover([corpus["path"]])[0]
        m = 0
        for batch in nio.read_source(src, 0):
            if m >= N:
                break
            hasher.signatures_and_shingles(batch.text)
            m += len(batch.rows)
        read_s = time.perf_counter() - t0
        out["read_stage_docs_per_s"] = round(m / read_s)
        out["read_stage_cpu_us_per_doc"] = round((time.process_time() - c0) / m * 1e6, 1)

        # ---- embedded: N documents in `parts` adds
        folder = os.path.join(tmp, "folder.ndx")
        idx = Index(folder)
        add_s, add_cpu, part_files = add_in_parts(idx, corpus["path"], args.parts, N, tmp)
        stats = idx.stats()
        out["folder"] = {"add_seconds": round(add_s, 2), "add_docs_per_s": round(N / add_s),
                         "add_cpu_us_per_doc": round(add_cpu / N * 1e6, 1),
                         "adds": args.parts, "segments": stats["segments"],
                         "bytes_per_document": stats["bytes_per_document"],
                         "bytes_per_document_by_file": stats["bytes_per_document_by_file"]}
        out["folder"]["query_latency_10_segments"] = latency(Index(folder), new_texts, args.latency_queries)
        c = Index(folder).compact()
        out["folder"]["compact_seconds"] = c["seconds"]
        out["folder"]["query_latency"] = latency(Index(folder), new_texts, args.latency_queries)

        # ---- batch match over the Q new documents (pre-hashed, like a pipeline stage)
        res = cfg.resolved()
        sigs, off, raw = hasher.signatures_and_shingles(new_texts)
        off, raw = off.copy(), raw.copy()
        keys = band_keys(sigs, res.bands, res.rows, res.seed)
        idx = Index(folder)
        t0 = time.perf_counter()
        matches = idx.match(keys, sigs, (off, raw))
        match_s = time.perf_counter() - t0
        out["folder"]["match_docs_per_s"] = round(Q / match_s)
        out["folder"]["match_seconds"] = round(match_s, 3)
        out["matched_documents"] = len(matches)
        out["candidate_pairs"] = matches.candidates

        # positions in the index: ids are partNN.jsonl:ROW
        step = (N + args.parts - 1) // args.parts
        # ids are NAME:LINE, lines from 1
        pos = np.array([int(i.rsplit("part", 1)[1][:2]) * step + int(i.rsplit(":", 1)[1]) - 1 for i in matches.id.to_pylist()],
                       dtype=np.int64)
        qd = matches.doc

        # ---- recall on planted pairs (index original, new copy) with exact Jaccard >= 0.8; the
        # best match may be another indexed copy of the same original: same cluster counts
        from common import gram_set, jaccard_sets
        got = dict(zip(qd.tolist(), pos.tolist()))
        planted = total = found = wrong = 0
        for q in range(Q):
            d = N + q
            o = int(cluster[d])
            hit = got.get(q)
            if hit is not None and int(cluster[hit]) != o:
                wrong += 1
            if o == d or o >= N:
                continue
            planted += 1
            if jaccard_sets(gram_set(texts[d]), gram_set(texts[o])) >= 0.8:
                total += 1
                found += hit is not None and int(cluster[hit]) == o
        out["recall"] = {"planted_pairs": planted, "pairs_at_or_above_0.8": total, "found": found,
                         "share_found": round(found / total, 4) if total else None,
                         "matches_outside_the_cluster": wrong}

        # ---- fingerprint vs 64-bit exact, and the estimate, on the verified (query, index) pairs
        pair_texts = [new_texts[q] for q in qd] + [texts[p] for p in pos]
        s2, o2, h2 = hasher.signatures_and_sets(pair_texts)
        k = len(qd)
        left, right = np.arange(k), np.arange(k, 2 * k)
        full = exact_jaccard(o2, h2, left, right)
        fo, fv = fingerprints(o2, h2)
        short = exact_jaccard(fo, fv, left, right)
        est = estimated_jaccard(s2, left, right)
        out["verification"] = {
            "pairs": k,
            "fingerprint32_vs_exact64_max_abs": float(np.max(np.abs(short - full))) if k else None,
            "fingerprint32_vs_exact64_mean_abs": float(np.mean(np.abs(short - full))) if k else None,
            "reported_vs_exact64_max_abs": float(np.max(np.abs(matches.similarity - full))) if k else None,
            "estimate_vs_exact64_mean_abs": float(np.mean(np.abs(est - full))) if k else None,
            "estimate_vs_exact64_max_abs": float(np.max(np.abs(est - full))) if k else None,
            "bytes_per_document_if_store_estimate": 4 * res.num_perm + 12 * res.bands + 20,
            "bytes_per_document_if_64bit_sets": round(stats["bytes_per_document"]
                                                      + stats["bytes_per_document_by_file"].get("fp.u32", 0), 1),
        }

        # ---- Redis
        if not args.no_redis:
            proc, port = start_redis(tmp)
            try:
                url = f"redis://127.0.0.1:{port}/0"
                ridx = Index(url)
                t0, c0 = time.perf_counter(), time.process_time()
                for p, f in enumerate(part_files):
                    ridx.add(Path(f), name=f"part{p:02d}")
                radd = time.perf_counter() - t0
                out["redis"] = {"add_seconds": round(radd, 2), "add_docs_per_s": round(N / radd),
                                "add_cpu_us_per_doc_client": round((time.process_time() - c0) / N * 1e6, 1),
                                "persistence": "appendonly yes, appendfsync everysec"}
                # pre-hashed documents: the storage's own cost
                url2 = f"redis://127.0.0.1:{port}/1"
                r2 = Index(url2)
                pre = min(20000, N)
                hs = hasher.signatures_and_shingles(texts[:pre])
                k2 = band_keys(hs[0], res.bands, res.rows, res.seed)
                ids = pa.array([str(i) for i in range(pre)], pa.string())
                t0 = time.perf_counter()
                r2.add_arrays(k2, ids, "pre", signatures=hs[0], shingles=(hs[1].copy(), hs[2].copy()))
                out["redis"]["add_arrays_docs_per_s"] = round(pre / (time.perf_counter() - t0))
                f2 = Index(os.path.join(tmp, "arrays.ndx"))
                t0 = time.perf_counter()
                f2.add_arrays(k2, ids, "pre", signatures=hs[0], shingles=(hs[1].copy(), hs[2].copy()))
                out["folder"]["add_arrays_docs_per_s"] = round(pre / (time.perf_counter() - t0))
                out["redis"]["query_latency_10_segments"] = latency(Index(url), new_texts, args.latency_queries)
                Index(url).compact()
                ridx = Index(url)
                t0 = time.perf_counter()
                latency(ridx, new_texts, 1)
                out["redis"]["first_query_seconds_incl_segment_load"] = round(time.perf_counter() - t0, 3)
                out["redis"]["query_latency"] = latency(ridx, new_texts, args.latency_queries)
                t0 = time.perf_counter()
                rm = ridx.match(keys, sigs, (off, raw))
                out["redis"]["match_docs_per_s"] = round(Q / (time.perf_counter() - t0))
                assert rm.id.to_pylist() == matches.id.to_pylist()
                import redis
                info = redis.Redis(port=port).info("memory")
                out["redis"]["server_used_memory_bytes_per_document"] = round(
                    info["used_memory"] / (N + pre), 1)
            finally:
                proc.terminate()
                proc.wait()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    result["results"] = out
    write_json(Path(args.output), result)
    import json
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
