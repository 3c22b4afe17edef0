"""10M documents on one machine: build a large corpus, run ``neardup dedup`` on it, measure.

    nice -n 19 .venv/bin/python bench/scale.py --generate-only          # build the 10 shards
    nice -n 19 .venv/bin/python bench/scale.py --docs 10000000 --skip-generate

The corpus (``--data`` folder, default ``bench/data/scale_10m/``, git-ignored, not committed) is
``part-00.jsonl.zst`` ... ``part-09.jsonl.zst``, 1M documents each, made from the 1M synthetic
corpus ``bench/data/synth_1000000_s0.jsonl`` (``--source``; generated with
``common.ensure_corpus`` when missing) by a per-shard bijection of the words:

    shard 0 is the source corpus itself; in shard k >= 1 every letter a-z of every text is mapped
    through a fixed permutation of the alphabet (``numpy.random.default_rng(1000 + k)``), and the
    ids become ``k * 1_000_000 + id`` (unique over the corpus).

A letter permutation maps words one-to-one onto words of the same length, so every shard keeps
the source's near-duplicate structure exactly (same clusters, same word-5-gram Jaccard of every
pair, same bytes per text, same number of words; ids get one digit more), while the texts of different shards are
unrelated: a permuted word may happen to be another word of the vocabulary, but for two shards to
share a word 5-gram, five consecutive permuted words must also form a 5-gram of the other shard,
which is as improbable as between two unrelated documents (neardup.testing.synth: ~1e-10). So the
expected removals of the 10M corpus are 10x those of the 1M one, none of them across shards.
The source lines are checked to be exactly ``{"id": N, "text": "..."}`` with the text made of
a-z and spaces only (what neardup.testing.synth writes), so the rewrite can work on bytes.

Each shard is streamed: the source is read line by line and written through one
``zstandard`` stream writer (level 3, as neardup's own writer), in bounded memory. A shard is
written to ``.part-KK.jsonl.zst.tmp`` and renamed when complete; shards already present are
skipped, so an interrupted generation is resumed by running the script again.

The measured run is one subprocess (under ``common.run_measured``'s launcher)::

    python -m neardup dedup SHARD... --output OUT --work-dir WORK --threshold 0.8 --quiet

on the first ``--docs / 1M`` shards, with ``--work-dir`` given explicitly (neardup then keeps the
work dir after the run, and its size can be sampled while it runs). Measured:

- wall time, CPU time; peak memory of the process tree (psutil RSS sum sampled every 0.25 s, the
  per-process VmHWM high-water marks, and wait4's ru_maxrss; ``peak_memory_bytes`` is the largest);
- what the run read from storage (wait4's ``ru_inblock`` and major faults): the compressed input,
  and over it the work files read back after the page cache let them go;
- every ~2 s: the size of the work dir and of the output folder (``os.scandir`` walk), the free
  space of their file system and the RSS of the process tree; the peaks, the least free space, and
  the samples (a timeline to tell which stage holds the disk and the memory);
- the corpus on disk (compressed bytes) and the source's uncompressed bytes per shard;
- from the output's ``stats.json``: the counts and the seconds of each stage.

An untimed 2,000-document run comes first (numba recompiles its kernels on the first run after a
source change; ``--no-warmup`` skips it). The output and work dir are deleted after measuring
unless ``--keep-output``. Writes ``bench/results/scale_<N>.json`` and prints a table.

The 1M baseline to compare a 10M run with is ``--docs 1000000`` (shard 0, the same texts as the
source corpus, read from the same compressed format).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import threading
import time
from pathlib import Path
from typing import List, Optional

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import (DATA_DIR, REPO_DIR, RESULTS_DIR, WARMUP_ENV, ensure_corpus, fmt_bytes, run_header,  # noqa: E402
                    run_measured, write_json)

SHARD_DOCS = 1_000_000
MAX_SHARDS = 10
ZSTD_LEVEL = 3
LETTERS = b"abcdefghijklmnopqrstuvwxyz"
_PREFIX = b'{"id": '
_TEXT_KEY = b', "text": "'
_SUFFIX = b'"}\n'


def shard_name(k: int) -> str:
    return f"part-{k:02d}.jsonl.zst"


def letter_table(k: int) -> bytes:
    """bytes.translate table of shard k: identity for k = 0, else a fixed permutation of a-z."""
    if k == 0:
        return bytes(range(256))
    import numpy as np
    perm = np.random.default_rng(1000 + k).permutation(26)
    table = bytearray(range(256))
    for i, j in enumerate(perm.tolist()):
        table[LETTERS[i]] = LETTERS[j]
    return bytes(table)


def write_shard(source: Path, folder: Path, k: int, log=print) -> dict:
    """Write shard k (streamed, to a temporary name, renamed when complete); facts about it."""
    import zstandard

    final = folder / shard_name(k)
    tmp = folder / f".{shard_name(k)}.tmp"
    table = letter_table(k)
    offset = k * SHARD_DOCS
    t0 = time.perf_counter()
    n = 0
    raw = 0
    with open(source, "rb") as src, open(tmp, "wb") as raw_out:
        cctx = zstandard.ZstdCompressor(level=ZSTD_LEVEL)
        with cctx.stream_writer(raw_out, closefd=False) as out:
            pending: List[bytes] = []
            pending_bytes = 0
            for line in src:
                if not line.strip():
                    continue
                cut = line.find(_TEXT_KEY)
                if cut < 0 or not line.startswith(_PREFIX) or not line.endswith(_SUFFIX):
                    raise ValueError(f"{source}: line {n + 1} is not {{\"id\": N, \"text\": \"...\"}}")
                text = line[cut + len(_TEXT_KEY):-len(_SUFFIX)]
                if text.translate(None, LETTERS + b" "):
                    raise ValueError(f"{source}: line {n + 1}: the text has characters other than a-z and space")
                new = b'{"id": %d, "text": "%s"}\n' % (offset + int(line[len(_PREFIX):cut]), text.translate(table))
                pending.append(new)
                pending_bytes += len(new)
                raw += len(new)
                n += 1
                if pending_bytes >= 1 << 24:
                    out.write(b"".join(pending))
                    pending.clear()
                    pending_bytes = 0
            if pending:
                out.write(b"".join(pending))
        raw_out.flush()
        os.fsync(raw_out.fileno())
    if n != SHARD_DOCS:
        tmp.unlink()
        raise ValueError(f"{source} has {n} documents, not {SHARD_DOCS}")
    os.replace(tmp, final)
    seconds = time.perf_counter() - t0
    size = final.stat().st_size
    log(f"  {final.name}: {n:,} documents, {raw / 1e9:.2f} GB -> {size / 1e9:.2f} GB zstd in {seconds:.1f} s")
    return {"name": final.name, "documents": n, "uncompressed_bytes": raw, "bytes": size, "seconds": seconds}


def generate(source: Path, folder: Path, shards: int, log=print) -> dict:
    """Make the first ``shards`` shards in ``folder`` (those already complete are kept)."""
    folder.mkdir(parents=True, exist_ok=True)
    for stale in folder.glob(".part-*.tmp"):
        stale.unlink()
    meta_path = folder.parent / f"{folder.name}.meta.json"
    meta = json.loads(meta_path.read_text()) if meta_path.exists() else {"shards": {}}
    t0 = time.perf_counter()
    made = 0
    for k in range(shards):
        final = folder / shard_name(k)
        if final.exists() and final.name in meta["shards"]:
            log(f"  {final.name}: present")
            continue
        if final.exists():  # complete (renamed) but its facts were lost
            final.unlink()
        meta["shards"][final.name] = write_shard(source, folder, k, log)
        meta["source"] = str(source)
        meta["source_bytes"] = source.stat().st_size
        meta_path.write_text(json.dumps(meta, indent=2) + "\n")
        made += 1
    return {"meta": str(meta_path), "made": made, "seconds": time.perf_counter() - t0}


def corpus_facts(folder: Path, shards: int) -> dict:
    meta_path = folder.parent / f"{folder.name}.meta.json"
    meta = json.loads(meta_path.read_text()) if meta_path.exists() else {"shards": {}}
    names = [shard_name(k) for k in range(shards)]
    per = [meta["shards"].get(n, {}) for n in names]
    return {
        "folder": str(folder),
        "shards": names,
        "documents": sum(p.get("documents", 0) for p in per) or None,
        "bytes": sum((folder / n).stat().st_size for n in names),
        "uncompressed_bytes": sum(p.get("uncompressed_bytes", 0) for p in per) or None,
        "generate_seconds": sum(p.get("seconds", 0) for p in per) or None,
        "source": meta.get("source"),
    }


def tree_bytes(path: Path) -> int:
    """Bytes of the regular files under ``path`` (0 when it does not exist); tolerant of files
    appearing and vanishing while it walks."""
    total = 0
    stack = [str(path)]
    while stack:
        top = stack.pop()
        try:
            with os.scandir(top) as it:
                for e in it:
                    try:
                        if e.is_dir(follow_symlinks=False):
                            stack.append(e.path)
                        elif e.is_file(follow_symlinks=False):
                            total += e.stat(follow_symlinks=False).st_size
                    except OSError:
                        pass
        except OSError:
            pass
    return total


def _children_rss() -> int:
    """RSS summed over this process's descendants (the measured run and its launcher)."""
    import psutil
    total = 0
    try:
        procs = psutil.Process().children(recursive=True)
    except psutil.Error:
        return 0
    for p in procs:
        try:
            total += p.memory_info().rss
        except psutil.Error:
            pass
    return total


class DiskSampler(threading.Thread):
    """Every ``interval`` s: sizes of the work dir and the output, free space of their disk, and
    the RSS of the process tree (a coarse memory timeline; the peak comes from run_measured)."""

    def __init__(self, work: Path, out: Path, interval: float = 2.0):
        super().__init__(daemon=True)
        self.work, self.out, self.interval = work, out, interval
        self.stop = threading.Event()
        self.samples: List[list] = []
        self.system: List[list] = []  # SYSTEM_COLUMNS, the machine's counters (not only the run's)
        self.t0 = time.perf_counter()

    def sample(self) -> None:
        w = tree_bytes(self.work)
        o = tree_bytes(self.out)
        free = shutil.disk_usage(self.work.parent).free
        t = round(time.perf_counter() - self.t0, 1)
        self.samples.append([t, w, o, free, _children_rss()])
        self.system.append([t] + _system_counters())

    def run(self) -> None:
        while not self.stop.is_set():
            self.sample()
            self.stop.wait(self.interval)

    def finish(self) -> dict:
        self.stop.set()
        self.join()
        self.sample()
        s = self.samples
        return {
            "interval_s": self.interval,
            "peak_work_dir_bytes": max(x[1] for x in s),
            "peak_output_bytes": max(x[2] for x in s),
            "peak_work_plus_output_bytes": max(x[1] + x[2] for x in s),
            "final_work_dir_bytes": s[-1][1],
            "final_output_bytes": s[-1][2],
            "free_bytes_at_start": s[0][3],
            "free_bytes_min": min(x[3] for x in s),
            "samples_columns": ["t_s", "work_dir_bytes", "output_bytes", "free_bytes", "rss_tree_bytes"],
            "samples": s,
            "system_columns": ["t_s"] + SYSTEM_COLUMNS,
            "system_samples": self.system,
        }


# the machine's counters sampled beside the run (cumulative, as the kernel counts them): CPU time
# of all cores in clock ticks by kind (/proc/stat) and the page cache's traffic (/proc/vmstat):
# where a run's system time and its waits for the disk come from, stage by stage
_STAT_KINDS = ["user", "nice", "system", "idle", "iowait", "irq", "softirq"]
_VMSTAT = ["pgpgin", "pgpgout", "pgmajfault", "pgsteal_kswapd", "pgsteal_direct", "pgscan_direct",
           "workingset_refault_file"]
SYSTEM_COLUMNS = ["cpu_" + k + "_ticks" for k in _STAT_KINDS] + _VMSTAT + ["allocstall", "dirty_kb", "cached_kb"]


def _system_counters() -> list:
    try:
        with open("/proc/stat") as f:
            cpu = [int(x) for x in f.readline().split()[1:1 + len(_STAT_KINDS)]]
        vm = {}
        with open("/proc/vmstat") as f:
            for line in f:
                k, _, v = line.partition(" ")
                vm[k] = int(v)
        mem = {}
        with open("/proc/meminfo") as f:
            for line in f:
                k, _, v = line.partition(":")
                mem[k] = int(v.split()[0])
    except (OSError, ValueError):
        return [None] * len(SYSTEM_COLUMNS)
    stalls = sum(v for k, v in vm.items() if k.startswith("allocstall"))
    return cpu + [vm.get(k) for k in _VMSTAT] + [stalls, mem.get("Dirty"), mem.get("Cached")]


def warmup(shard: Path, run_dir: Path, log=print) -> dict:
    """An untimed neardup run on the first 2,000 documents of ``shard`` (fills numba's cache)."""
    import zstandard
    tmp = run_dir / "warmup"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    lines = []
    with open(shard, "rb") as f, zstandard.ZstdDecompressor().stream_reader(f) as r:
        import io
        for line in io.BufferedReader(r):
            lines.append(line)
            if len(lines) >= 2000:
                break
    (tmp / "warmup.jsonl").write_bytes(b"".join(lines))
    t0 = time.perf_counter()
    cmd = [sys.executable, "-m", "neardup", "dedup", str(tmp / "warmup.jsonl"), "--output", str(tmp / "out"),
           "--threshold", "0.8", "--quiet"]
    rc = __import__("subprocess").run(cmd, env=dict(_env(), **WARMUP_ENV)).returncode
    seconds = time.perf_counter() - t0
    shutil.rmtree(tmp, ignore_errors=True)
    log(f"warm-up (2,000 documents, untimed): {seconds:.1f} s, exit {rc}")
    if rc != 0:
        raise SystemExit(f"the warm-up run failed (exit {rc}): {' '.join(cmd)}")
    return {"seconds": seconds, "returncode": rc}


def _env() -> dict:
    env = dict(os.environ)
    src = str(REPO_DIR / "src")
    if "PYTHONPATH" not in env:  # run this checkout's neardup unless told otherwise
        env["PYTHONPATH"] = src
    return env


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--docs", type=int, default=10 * SHARD_DOCS,
                    help="documents to deduplicate: a multiple of 1M up to 10M (default: 10M)")
    ap.add_argument("--data", type=Path, default=DATA_DIR / "scale_10m", help="the shards' folder")
    ap.add_argument("--source", type=Path, default=None,
                    help="the 1M JSONL corpus the shards are made from (default: "
                         "bench/data/synth_1000000_s0.jsonl, generated when missing)")
    ap.add_argument("--shards", type=int, default=None,
                    help="shards to generate (default: those --docs needs; --generate-only: all 10)")
    ap.add_argument("--generate-only", action="store_true", help="make the shards and stop")
    ap.add_argument("--skip-generate", action="store_true", help="use the shards present; make none")
    ap.add_argument("--run-dir", type=Path, default=DATA_DIR / "scale_run",
                    help="where the output (RUN/out) and the work dir (RUN/work) go")
    ap.add_argument("--keep-output", action="store_true", help="keep the output and work dir")
    ap.add_argument("--no-warmup", action="store_true", help="skip the untimed 2,000-document run")
    ap.add_argument("--timeout", type=float, default=None, help="seconds before the run is killed")
    ap.add_argument("--neardup-args", default="", help="more options for neardup dedup")
    ap.add_argument("--output", type=Path, default=None,
                    help="result file (default: bench/results/scale_<docs>.json)")
    args = ap.parse_args(argv)

    if args.docs % SHARD_DOCS or not 1 <= args.docs // SHARD_DOCS <= MAX_SHARDS:
        ap.error("--docs must be a multiple of 1000000 from 1000000 to 10000000")
    n_shards = args.docs // SHARD_DOCS
    header = run_header(sys.argv)
    data = args.data.resolve()

    gen = None
    if not args.skip_generate:
        to_make = args.shards or (MAX_SHARDS if args.generate_only else n_shards)
        source = args.source
        if source is None:
            source = Path(ensure_corpus(SHARD_DOCS, 0)["path"])
        print(f"shards in {data} from {source}:")
        gen = generate(source.resolve(), data, to_make)
        print(f"  {gen['made']} made in {gen['seconds']:.1f} s")
        if args.generate_only:
            facts = corpus_facts(data, to_make)
            print(f"corpus: {facts['documents']:,} documents, {facts['bytes'] / 1e9:.2f} GB zstd, "
                  f"{(facts['uncompressed_bytes'] or 0) / 1e9:.2f} GB uncompressed, "
                  f"{(facts['generate_seconds'] or 0):.0f} s to generate")
            return 0
    missing = [shard_name(k) for k in range(n_shards) if not (data / shard_name(k)).exists()]
    if missing:
        raise SystemExit(f"{data}: missing {', '.join(missing)} (run without --skip-generate)")
    shards = [data / shard_name(k) for k in range(n_shards)]
    corpus = corpus_facts(data, n_shards)

    run_dir = args.run_dir.resolve()
    out, work = run_dir / "out", run_dir / "work"
    shutil.rmtree(out, ignore_errors=True)
    shutil.rmtree(work, ignore_errors=True)
    run_dir.mkdir(parents=True, exist_ok=True)
    warm = None if args.no_warmup else warmup(shards[0], run_dir)

    cmd = [sys.executable, "-m", "neardup", "dedup", *map(str, shards), "--output", str(out),
           "--work-dir", str(work), "--threshold", "0.8", "--quiet", *args.neardup_args.split()]
    print(f"running {args.docs:,} documents: {' '.join(cmd)}")
    sampler = DiskSampler(work, out)
    sampler.start()
    r = run_measured(cmd, timeout=args.timeout, poll_s=0.25, env=_env())
    disk = sampler.finish()
    stats = None
    try:
        stats = json.loads((out / "stats.json").read_text())
    except (OSError, ValueError):
        pass
    kept_bytes = tree_bytes(out / "kept") if out.exists() else None
    if not args.keep_output:
        shutil.rmtree(out, ignore_errors=True)
        shutil.rmtree(work, ignore_errors=True)

    result = {
        **header,
        "neardup_command": r["command"],
        "pythonpath": _env().get("PYTHONPATH"),
        "docs": args.docs,
        "corpus": corpus,
        "generation": gen,
        "warmup": warm,
        "returncode": r["returncode"],
        "timed_out": r["timed_out"],
        "wall_s": r["wall_s"],
        "docs_per_s": args.docs / r["wall_s"] if r["wall_s"] else None,
        "cpu_user_s": r["cpu_user_s"],
        "cpu_sys_s": r["cpu_sys_s"],
        # read from storage, not the page cache: the compressed input (read once), and what is
        # over it, the work files read back after this VM paged them out (idle ~60 s)
        "disk_read_bytes": r.get("disk_read_bytes"),
        "major_faults": r.get("major_faults"),
        "memory": {k: r[k] for k in ("peak_memory_bytes", "peak_rss_tree_bytes", "peak_vmhwm_bytes",
                                     "ru_maxrss_bytes", "memory_samples")},
        "disk": {**disk, "kept_bytes": kept_bytes, "corpus_bytes": corpus["bytes"]},
        "counts": (stats or {}).get("counts"),
        "stage_seconds": (stats or {}).get("seconds"),
        "params": (stats or {}).get("params"),
        "stdout_tail": r["stdout_tail"][-2000:],
        "stderr_tail": r["stderr_tail"][-2000:],
    }
    path = args.output or RESULTS_DIR / f"scale_{args.docs}.json"
    write_json(path, result)

    print()
    print(f"{'documents':<28}{args.docs:>16,}")
    print(f"{'exit code':<28}{r['returncode']:>16}{'  (timed out)' if r['timed_out'] else ''}")
    print(f"{'wall s':<28}{r['wall_s']:>16.1f}")
    print(f"{'documents / s':<28}{result['docs_per_s']:>16,.0f}")
    print(f"{'CPU user + sys s':<28}{(r['cpu_user_s'] or 0) + (r['cpu_sys_s'] or 0):>16.1f}")
    if r.get("disk_read_bytes") is not None:
        print(f"{'read from storage':<28}{fmt_bytes(r['disk_read_bytes']):>16}  (input {fmt_bytes(corpus['bytes'])}, "
              f"{r.get('major_faults')} major faults)")
    print(f"{'peak memory':<28}{fmt_bytes(r['peak_memory_bytes']):>16}")
    print(f"{'  RSS tree / VmHWM':<28}{fmt_bytes(r['peak_rss_tree_bytes']):>16}  {fmt_bytes(r['peak_vmhwm_bytes'])}")
    print(f"{'corpus (zstd)':<28}{fmt_bytes(corpus['bytes']):>16}")
    print(f"{'peak work dir':<28}{fmt_bytes(disk['peak_work_dir_bytes']):>16}")
    print(f"{'peak output':<28}{fmt_bytes(disk['peak_output_bytes']):>16}")
    print(f"{'peak work dir + output':<28}{fmt_bytes(disk['peak_work_plus_output_bytes']):>16}")
    print(f"{'free disk start / least':<28}{fmt_bytes(disk['free_bytes_at_start']):>16}  "
          f"{fmt_bytes(disk['free_bytes_min'])}")
    if stats:
        c = stats.get("counts", {})
        print(f"{'kept / removed':<28}{c.get('kept', 0):>16,}  {c.get('removed', 0):,}")
        print(f"{'candidate / verified pairs':<28}{c.get('candidate_pairs', 0):>16,}  {c.get('verified_pairs', 0):,}")
        for stage, s in (stats.get("seconds") or {}).items():
            print(f"{'  stage ' + stage + ' s':<28}{s:>16.1f}")
    print(f"written to {path}")
    if r["returncode"] != 0:
        print(r["stderr_tail"][-2000:], file=sys.stderr)
    return 0 if r["returncode"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
