"""neardup's datatrove steps against datatrove's own four-step MinHash: same corpus, same machine, same run.

    PYTHONPATH=src .venv/bin/python bench/datatrove_peer.py --docs 20000 [--tasks 2] [--quiet]

(needs the bench extra: datatrove, orjson, and tokenizers, which datatrove.pipeline.dedup imports)

The synthetic corpus of N documents (``bench/data/synth_N_s0.jsonl``, planted near-duplicate
clusters), read by datatrove's ``JsonlReader`` in every pipeline, each pipeline on a
``LocalPipelineExecutor`` (``--tasks`` ranks, ``workers=1``: ranks one after the other, in this
process). Timed, wall and CPU (this process and its children), each phase on its own:

- datatrove, whole corpus: ``MinhashDedupSignature`` (word 5-grams of ``\\w+`` words: a regex
  tokenizer given to datatrove, as nltk is not installed here and neardup's words are ``\\w+``),
  ``MinhashDedupBuckets`` (one task a bucket), ``MinhashDedupCluster`` (one task),
  ``MinhashDedupFilter`` (reads the corpus again, writes the kept documents); its default
  ``MinhashConfig`` (14 buckets x 8 hashes; no verification);
- neardup, whole corpus, inside datatrove: ``corpus_writer`` (the ranks write the documents),
  ``NeardupDedup`` (one task: ``neardup dedup``, 0.8, verified exactly), ``kept_reader`` ->
  ``JsonlWriter`` (the kept documents back through datatrove);
- neardup's index filter: the first half added to an index (``Index.add``), then
  ``JsonlReader`` -> ``NeardupFilter`` -> ``JsonlWriter`` over the second half.

neardup's kernels are compiled and loaded by a warm-up before anything is timed. The load average
is recorded at the start and at the end (the machine may be shared: compare the two tools
within one run, not across runs). Writes ``bench/results/datatrove_peer.json`` (``--out``).
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import RESULTS_DIR, ensure_corpus, read_jsonl_texts, run_header, write_json  # noqa: E402

from datatrove.executor import LocalPipelineExecutor  # noqa: E402
from datatrove.pipeline.dedup.minhash import (MinhashConfig, MinhashDedupBuckets, MinhashDedupCluster,  # noqa: E402
                                              MinhashDedupFilter, MinhashDedupSignature)
from datatrove.pipeline.readers import JsonlReader  # noqa: E402
from datatrove.pipeline.writers import JsonlWriter  # noqa: E402
from datatrove.utils.word_tokenizers import WordTokenizer  # noqa: E402

import neardup  # noqa: E402
from neardup.integrations.datatrove import NeardupDedup, NeardupFilter, corpus_writer, kept_reader  # noqa: E402

WORD = re.compile(r"\w+")


def _xxhash_of_str() -> None:
    """datatrove 0.10 hashes shingles as str with xxhash, which xxhash 4 refuses ("Strings must be
    encoded before hashing"; datatrove asks for xxhash<4): the same hash of the UTF-8 bytes."""
    import xxhash
    from datatrove.utils.hashes import xxhash as dt_xxhash
    dt_xxhash.xxhash32 = lambda data: xxhash.xxh32_intdigest(data.encode() if isinstance(data, str) else data)
    dt_xxhash.xxhash64 = lambda data: xxhash.xxh64_intdigest(data.encode() if isinstance(data, str) else data)


class RegexWords(WordTokenizer):
    """``\\w+`` words, as neardup splits them (datatrove's English tokenizer needs nltk and its data)."""

    def word_tokenize(self, text):
        return WORD.findall(text)

    def sent_tokenize(self, text):
        return [text]

    def span_tokenize(self, text):
        return [(0, len(text))]


def _cpu() -> float:
    s, c = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return s.ru_utime + s.ru_stime + c.ru_utime + c.ru_stime


def _timed(phases: dict, name: str, fn) -> None:
    w0, c0 = time.perf_counter(), _cpu()
    fn()
    phases[name] = {"wall_s": round(time.perf_counter() - w0, 3), "cpu_s": round(_cpu() - c0, 3)}
    print(f"  {name}: {phases[name]['wall_s']:.2f} s wall, {phases[name]['cpu_s']:.2f} s CPU", flush=True)


def _lines(folder: Path) -> int:
    import gzip
    n = 0
    for p in folder.rglob("*.jsonl*"):
        with (gzip.open(p, "rt") if p.suffix == ".gz" else open(p)) as f:
            n += sum(1 for _ in f)
    return n


QUIET = False  # --quiet: the executors' logs and stats go to their logging_dir only


def _run(steps, logs: Path, tasks: int = 1) -> None:
    import contextlib
    import io
    executor = LocalPipelineExecutor(steps, tasks=tasks, workers=1, logging_dir=str(logs))
    if not QUIET:
        executor.run()
        return
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        executor.run()  # datatrove adds a sink on sys.stderr for each task: this one


def datatrove_minhash(src: Path, work: Path, tasks: int, config: MinhashConfig) -> dict:
    phases: dict = {}
    d = work / "datatrove"
    _timed(phases, "signatures", lambda: _run([JsonlReader(str(src)), MinhashDedupSignature(
        str(d / "sigs"), config=config, language=RegexWords())], d / "logs-sigs", tasks))
    _timed(phases, "buckets", lambda: _run([MinhashDedupBuckets(str(d / "sigs"), str(d / "buckets"), config=config)],
                                           d / "logs-buckets", config.num_buckets))
    _timed(phases, "cluster", lambda: _run([MinhashDedupCluster(str(d / "buckets"), str(d / "remove"), config=config)],
                                           d / "logs-cluster", 1))
    _timed(phases, "filter", lambda: _run([JsonlReader(str(src)), MinhashDedupFilter(
        str(d / "remove"), exclusion_writer=JsonlWriter(str(d / "removed"))), JsonlWriter(str(d / "kept"))],
        d / "logs-filter", tasks))
    return {"phases": phases, "total_wall_s": round(sum(p["wall_s"] for p in phases.values()), 3),
            "kept": _lines(d / "kept"), "removed": _lines(d / "removed"),
            "config": {"n_grams": config.n_grams, "num_buckets": config.num_buckets,
                       "hashes_per_bucket": config.hashes_per_bucket, "verification": "none"}}


def neardup_whole(src: Path, work: Path, tasks: int) -> dict:
    phases: dict = {}
    d = work / "neardup"
    _timed(phases, "write", lambda: _run([JsonlReader(str(src)), corpus_writer(d / "docs")], d / "logs-write", tasks))
    _timed(phases, "dedup", lambda: _run([NeardupDedup(d / "docs", d / "out", threshold=0.8)], d / "logs-dedup", 1))
    _timed(phases, "read", lambda: _run([kept_reader(d / "out"), JsonlWriter(str(d / "kept"))], d / "logs-read", tasks))
    stats = __import__("json").loads((d / "out" / "stats.json").read_text())["counts"]
    return {"phases": phases, "total_wall_s": round(sum(p["wall_s"] for p in phases.values()), 3),
            "kept": _lines(d / "kept"), "removed": int(stats["removed"]),
            "config": {"threshold": 0.8, "ngram": 5, "verify": "exact"}}


def neardup_filter(texts, work: Path, tasks: int) -> dict:
    """The first half indexed, the second half filtered against it."""
    import json
    phases: dict = {}
    d = work / "filter"
    half = len(texts) // 2
    (d / "new").mkdir(parents=True)
    with open(d / "new" / "new.jsonl", "w") as f:
        for i, t in enumerate(texts[half:], start=half):
            f.write(json.dumps({"id": str(i), "text": t}) + "\n")
    _timed(phases, "index_add", lambda: neardup.Index(str(d / "idx.ndx")).add(
        texts[:half], ids=[str(i) for i in range(half)], name="old"))
    _timed(phases, "filter", lambda: _run([JsonlReader(str(d / "new")), NeardupFilter(d / "idx.ndx"),
                                           JsonlWriter(str(d / "kept"))], d / "logs-filter", tasks))
    kept = _lines(d / "kept")
    return {"phases": phases, "indexed": half, "filtered": len(texts) - half, "kept": kept,
            "removed": len(texts) - half - kept,
            "filter_docs_per_s": round((len(texts) - half) / phases["filter"]["wall_s"], 1)}


def warm_up(work: Path) -> None:
    """Compile and load neardup's kernels (dedup and the index) before anything is timed."""
    texts = [f"warm up text number {i} with a few more words" for i in range(50)]
    neardup.dedup(texts)
    idx = neardup.Index(str(work / "warm.ndx"))
    idx.add(texts[:25])
    idx.query(texts[25:])


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--docs", type=int, default=20000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--tasks", type=int, default=1, help="ranks of each datatrove pipeline (workers=1)")
    ap.add_argument("--out", type=Path, default=RESULTS_DIR / "datatrove_peer.json")
    ap.add_argument("--quiet", action="store_true", help="no datatrove logs on stderr")
    args = ap.parse_args(argv)
    if args.quiet:
        from loguru import logger
        global QUIET
        QUIET = True
        logger.remove()
    _xxhash_of_str()
    header = run_header(sys.argv)
    corpus = ensure_corpus(args.docs, args.seed, log=(lambda *a: None) if args.quiet else print)
    work = Path(tempfile.mkdtemp(prefix="neardup-dtpeer-"))
    try:
        src = work / "input"
        src.mkdir()
        os.symlink(os.path.abspath(corpus["path"]), src / "corpus.jsonl")
        warm_up(work)
        texts = read_jsonl_texts(Path(corpus["path"]))[0]
        print(f"datatrove_peer: {args.docs:,} documents, tasks={args.tasks}, load {os.getloadavg()[0]:.1f}")
        result = {**header, "corpus": corpus, "tasks": args.tasks,
                  "datatrove_minhash": datatrove_minhash(src, work, args.tasks, MinhashConfig()),
                  "neardup_in_datatrove": neardup_whole(src, work, args.tasks),
                  "neardup_filter": neardup_filter(texts, work, args.tasks),
                  "load_average_at_end": list(os.getloadavg())}
    finally:
        shutil.rmtree(work, ignore_errors=True)
    write_json(args.out, result)
    dt, nd = result["datatrove_minhash"], result["neardup_in_datatrove"]
    print(f"datatrove four steps: {dt['total_wall_s']:.1f} s, removed {dt['removed']:,}; neardup in datatrove: "
          f"{nd['total_wall_s']:.1f} s, removed {nd['removed']:,}; neardup filter: "
          f"{result['neardup_filter']['filter_docs_per_s']:,.0f} docs/s -> {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
