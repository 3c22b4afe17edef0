"""Many small files against the same documents in one JSONL file (issue 19): ``neardup dedup``
on a folder of N one-document text files of ~1 KB (in 100 subfolders), and on one JSONL file
holding the same texts, in the same run, alternating, a fresh process each time (start-up
included), outputs in fresh folders. Reports wall seconds per run and per stage, the ratio of
the folder to the JSONL file, and the load average around each run (the machine may be shared).

    python bench/small_files.py                     # 100,000 files, 2 repeats
    python bench/small_files.py --docs 20000 --repeat 1
    python bench/small_files.py --before /work/main/src --dir /tmp/small   # A/B: a checkout before

With ``--before SRC``, the four runs of a round alternate (files and JSONL of this checkout and of
the one whose ``src`` folder SRC is), CPU seconds (user + sys of the process tree) beside wall.

A run first waits until the outputs that the run before deleted (from the same corpus folder) were
deleted 5 minutes ago (:func:`settle`): ext4 without a journal makes each file created step over
the inodes freed lately, and a run started at once measured that, not neardup. Before each run
what the runs before wrote is put on disk (``sync``, not timed: :func:`written_back`), so that no
run pays for the write-back of the one before.

Each round also times the file system's floor for the folder (:func:`copy_floor`): ``cp -r`` of
its files, each read once and written again (100,000 files, where a run writes ~90,000 kept
ones), so that the ratio can be read against what this machine's file system costs: the
result's ``floor_to_jsonl`` and ``ratio_files_less_floor_to_jsonl`` ((files - floor) / JSONL).

Results: bench/results/small_files.json (``--output``; with the command, the machine and the load).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import sys
import tempfile
import time
from pathlib import Path

from common import RESULTS_DIR, REPO_DIR, alternating, probe_run, run_header, run_measured, write_json


def make(folder: Path, n: int, seed: int = 1) -> None:
    """``folder/files/SSS/NNNNNN.txt`` (one document each, ~1 KB of words; one in ten a near
    copy of an earlier one) and ``folder/one.jsonl`` with the same texts in the same order."""
    rng = random.Random(seed)
    vocab = ["".join(rng.choice("abcdefghijklmnop") for _ in range(rng.randint(3, 9))) for _ in range(20000)]
    texts = []
    files = folder / "files"
    with open(folder / "one.jsonl", "w", encoding="utf-8") as out:
        for i in range(n):
            if i >= 10 and i % 10 == 0:
                words = texts[rng.randrange(i)].split()
                words[rng.randrange(len(words))] = rng.choice(vocab)
                text = " ".join(words)
            else:
                text = " ".join(rng.choice(vocab) for _ in range(165))
            texts.append(text)
            sub = files / f"{i * 100 // n:03d}"
            if i * 100 % n < 100:
                sub.mkdir(parents=True, exist_ok=True)
            (sub / f"{i:06d}.txt").write_text(text, encoding="utf-8")
            out.write(json.dumps({"text": text}) + "\n")


def loadavg() -> list:
    return [round(x, 2) for x in os.getloadavg()]


def set_aside(out: Path) -> None:
    """``out`` moved into the corpus folder's ``trash`` (deleted once every run is over): 90,000
    files deleted just before a run makes its own 90,000 cost that run seconds of system time on
    a file system without a journal, whose inode allocator steps over the inodes freed lately
    one by one (ext4's ``recently_deleted``: freed in the last 60 s, 300 s while their inode
    table block is not yet written back), a cost of the benchmark, not of the run measured."""
    if out.exists():
        trash = out.parent / "trash"
        trash.mkdir(exist_ok=True)
        n = len(os.listdir(trash))
        while (trash / f"{out.name}-{n}").exists():  # a trash/ left by a killed run: names taken
            n += 1
        out.rename(trash / f"{out.name}-{n}")


FREED_SETTLE_S = 300  # ext4's RECENTCY_DIRTY: inodes freed this long ago are used again without a step each
EMPTIED = ".trash-emptied"  # in the corpus folder: when a run of this script last deleted its trash


def settle(base: Path) -> float:
    """Waits until the trash a run of this script deleted in ``base`` (the corpus folder) was
    deleted FREED_SETTLE_S ago (a second run started at once paid for its freed inodes: 100,000
    files, 4.6 CPU-s a run with no inode freed in the 5 minutes before, 7.5 CPU-s just after
    180,000 were deleted, 5.7 CPU-s a minute later, the difference system time); returns the
    seconds waited."""
    try:
        wait = FREED_SETTLE_S - (time.time() - float((base / EMPTIED).read_text()))
    except (OSError, ValueError):
        return 0.0
    if wait <= 0:
        return 0.0
    print(f"waiting {wait:.0f} s: the inodes of the last run's outputs were freed lately", file=sys.stderr)
    time.sleep(wait)
    return round(wait, 1)


SETTLE_FROM_DOCS = 10_000  # files a run from which the next one waits for their freed inodes (fewer: a few ms)


def empty_trash(base: Path, docs: int) -> None:
    """The runs' outputs deleted, and when, for :func:`settle` to wait for (runs of ``docs``
    files: at least SETTLE_FROM_DOCS)."""
    if (base / "trash").exists():
        shutil.rmtree(base / "trash", ignore_errors=True)
        if docs >= SETTLE_FROM_DOCS:
            (base / EMPTIED).write_text(str(time.time()))


def written_back() -> float:
    """Waits until what the runs before wrote is on disk (``sync``, not timed); returns its
    seconds. The kernel writes a file's dirty pages back ~30 s after they were written, in its
    flusher threads: the 90,000 files of a run over the folder were written back during the run
    that came after it (JSON Lines or files: ``wb_workfn`` held 7% of a files run's CPU samples,
    ``perf record -a``), a cost of the run before charged to the next. Each run's own write-back
    comes after it, as after any program that writes files."""
    t = time.perf_counter()
    os.sync()
    return round(time.perf_counter() - t, 2)


def probed(tree: str, probe: str, args: list, inp: Path, out: Path):
    """A ``neardup dedup INPUT -o OUT -q`` run by the probe ``probe`` (a ``python -c`` program that
    runs the command and prints one ``PROBE {json}`` line to stderr) with ``PYTHONPATH=tree``,
    ``args`` before the command's words, its output set aside before and after (:func:`set_aside`),
    what the runs before wrote on disk first (:func:`written_back`); returns (the probe's JSON,
    the output's stats.json, the run's wall seconds)."""
    set_aside(out)
    written_back()
    found = probe_run(tree, probe, [*args, "dedup", inp, "-o", out, "-q"], out)
    set_aside(out)
    return found


def alternate(trees, folder: Path, docs: int, repeat: int, one_run, name: str, show=lambda run: run) -> dict:
    """The rounds of an A/B over the folder of ``docs`` one-document files in ``folder`` (made
    when missing, :func:`make`): after :func:`settle`, one untimed run of each tree (kernels
    compiled, files read into the page cache), then ``repeat`` rounds of ``one_run(tree, inp,
    out)`` for each tree, their order swapped every other round. Returns the result's header
    (the command, the trees, the wait, the load) with ``runs``: {tree: [run, ...]}."""
    folder.mkdir(parents=True, exist_ok=True)
    if not (folder / "one.jsonl").exists():
        make(folder, docs)
    waited = settle(folder)
    trees = [str(Path(t).resolve()) for t in trees]
    result = {**run_header(sys.argv), "trees": trees, "waited_for_freed_inodes_s": waited,
              "load_before": os.getloadavg(), "runs": {t: [] for t in trees}}
    out = folder / f"out-{name}"
    for tree in trees:
        one_run(tree, folder / "files", out)
    for _, tree in alternating(trees, repeat):
        run = one_run(tree, folder / "files", out)
        result["runs"][tree].append(run)
        print(tree, show(run), flush=True)
    return result


def folder_args(doc: str, repeat: int, output: str) -> argparse.Namespace:
    """The arguments of an A/B script over the folder of one-document files (:func:`alternate`):
    ``--trees --dir --docs --repeat --output`` (``repeat`` and the file name ``output`` under
    bench/results/ its defaults)."""
    ap = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    ap.add_argument("--trees", nargs="+", default=["/work/main/src", "src"])
    ap.add_argument("--dir", required=True, help="the corpus folder (made by small_files.make when missing)")
    ap.add_argument("--docs", type=int, default=100_000)
    ap.add_argument("--repeat", type=int, default=repeat)
    ap.add_argument("--output", default=str(RESULTS_DIR / output))
    return ap.parse_args()


def finish(result: dict, summary: dict, a: argparse.Namespace) -> None:
    """An A/B over the folder ends: the summary and the load into ``result``, the runs' outputs
    deleted (:func:`empty_trash`), the result written to ``a.output``."""
    result["summary"] = summary
    result["load_after"] = os.getloadavg()
    empty_trash(Path(a.dir), a.docs)
    write_json(Path(a.output), result)


def run_once(inp: Path, out: Path, src: Path = REPO_DIR / "src") -> dict:
    set_aside(out)
    synced = written_back()
    env = dict(os.environ, PYTHONPATH=str(src))
    before = loadavg()
    r = run_measured([sys.executable, "-m", "neardup", "dedup", str(inp), "-o", str(out), "-q"], env=env)
    if r["returncode"] != 0:
        raise SystemExit(f"neardup failed on {inp}: {r['stderr_tail']}")
    stats = json.loads((out / "stats.json").read_text())
    set_aside(out)
    return {"wall_s": round(r["wall_s"], 2), "cpu_s": round((r["cpu_user_s"] or 0.0) + (r["cpu_sys_s"] or 0.0), 2),
            "peak_memory_bytes": r.get("peak_memory_bytes"), "stages_s": stats["seconds"],
            "kept": stats["counts"]["kept"], "removed": stats["counts"]["removed"],
            "load_before": before, "load_after": loadavg(), "sync_before_s": synced}


def copy_floor(inp: Path, out: Path) -> dict:
    """The file system's floor for the folder ``inp``: ``cp -r`` of it to ``out`` (its C loop
    reads each file once and makes and writes its copy: what any program that writes the folder's
    kept files pays the kernel, less what neardup's copy threads share), timed as a run is: what
    the runs before wrote put on disk first, the copy set aside after (:func:`set_aside`)."""
    set_aside(out)
    synced = written_back()
    before = loadavg()
    r = run_measured(["cp", "-r", str(inp), str(out)])
    if r["returncode"] != 0:
        raise SystemExit(f"cp -r {inp} failed: {r['stderr_tail']}")
    set_aside(out)
    return {"wall_s": round(r["wall_s"], 2), "cpu_s": round((r["cpu_user_s"] or 0.0) + (r["cpu_sys_s"] or 0.0), 2),
            "load_before": before, "load_after": loadavg(), "sync_before_s": synced}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--docs", type=int, default=100_000)
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--dir", default=None, help="where to make the corpus (default: a temporary folder)")
    ap.add_argument("--before", default=None, help="the src folder of a checkout to compare with, run alternating")
    ap.add_argument("--output", default=str(RESULTS_DIR / "small_files.json"), help="where the result goes")
    a = ap.parse_args()
    header = run_header(sys.argv)
    base = Path(a.dir) if a.dir else Path(tempfile.mkdtemp(prefix="neardup-small-files-"))
    base.mkdir(parents=True, exist_ok=True)
    if not (base / "one.jsonl").exists():
        make(base, a.docs)
    waited = settle(base)
    srcs = {"": REPO_DIR / "src"}
    if a.before:
        srcs["_before"] = Path(a.before).resolve()
    runs = {kind + tag: [] for tag in srcs for kind in ("files", "jsonl")}
    runs["floor"] = []
    for src in srcs.values():  # the kernels compiled, the files in the page cache: both kinds, since a
        for kind in ("one.jsonl", "files"):  # batch of files is a large_string array, JSONL's a string one,
            run_once(base / kind, base / "warm", src)  # and each type is a kernel compiled (~10 s) of its own
    for _ in range(a.repeat):
        for tag, src in srcs.items():
            runs["files" + tag].append(run_once(base / "files", base / "out-files", src))
            runs["jsonl" + tag].append(run_once(base / "one.jsonl", base / "out-jsonl", src))
            assert runs["files" + tag][-1]["removed"] == runs["jsonl" + tag][-1]["removed"]
        runs["floor"].append(copy_floor(base / "files", base / "out-floor"))
    best = {k: min(r["wall_s"] for r in v) for k, v in runs.items()}
    best_cpu = {k: min(r["cpu_s"] for r in v) for k, v in runs.items()}
    result = {**header, "docs": a.docs, "runs": runs, "best_wall_s": best, "best_cpu_s": best_cpu,
              "before_src": str(srcs["_before"]) if a.before else None, "waited_for_freed_inodes_s": waited,
              "ratio_files_to_jsonl": round(best["files"] / best["jsonl"], 2),
              "ratio_files_to_jsonl_cpu": round(best_cpu["files"] / best_cpu["jsonl"], 2),
              "floor_to_jsonl": round(best["floor"] / best["jsonl"], 2),
              "ratio_files_less_floor_to_jsonl": round((best["files"] - best["floor"]) / best["jsonl"], 2),
              "note": "same documents; a fresh process per run, start-up included; the kinds alternate "
                      "in one run so that the machine's load (shared by other work) falls on all alike"}
    if a.before:
        result["ratio_files_to_jsonl_before"] = round(best["files_before"] / best["jsonl_before"], 2)
        result["ratio_files_to_jsonl_cpu_before"] = round(best_cpu["files_before"] / best_cpu["jsonl_before"], 2)
    empty_trash(base, a.docs)
    write_json(Path(a.output), result)
    print(json.dumps({"best_wall_s": best, "best_cpu_s": best_cpu,
                      **{k: v for k, v in result.items() if k.startswith(("ratio", "floor"))}}))
    if not a.dir:
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
