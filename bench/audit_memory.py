"""Peak memory of ``neardup audit`` against the bytes of text it reads (``--max-bytes``).

    .venv/bin/python bench/audit_memory.py                       # 16M, 48M, 96M (the default) and 128M
    .venv/bin/python bench/audit_memory.py --sizes 8M,32M --docs 20000

The corpus is bench/corpora.py's reference pages (``--docs``, seed 0), written as JSONL once;
each size is one ``python -m neardup audit CORPUS --max-docs 10000000 --max-bytes SIZE``
subprocess (an untimed one compiles first), its peak memory measured as in bench/common.py
(largest of the process tree's polled RSS, VmHWM and wait4's ru_maxrss). Reported: the text bytes
read (from the corpus, the same rule as the audit's), the peak, and peak / text bytes. Writes
bench/results/audit_memory.json (``--output``).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import DATA_DIR, RESULTS_DIR, run_header, run_measured, write_json  # noqa: E402
from corpora import reference_corpus  # noqa: E402


def size(text: str) -> int:
    units = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    return int(float(text.rstrip("KMG")) * units[text[-1] if text[-1] in "KMG" else ""])


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--docs", type=int, default=40000)
    p.add_argument("--sizes", default="16M,48M,96M,128M")
    p.add_argument("--pythonpath", default=str(Path(__file__).resolve().parents[1] / "src"))
    p.add_argument("--output", type=Path, default=RESULTS_DIR / "audit_memory.json")
    args = p.parse_args(argv)
    path = DATA_DIR / f"reference_{args.docs}_s0.jsonl"
    texts = reference_corpus(args.docs, 0)
    if not path.exists():
        DATA_DIR.mkdir(parents=True, exist_ok=True)
        with open(path, "w", encoding="utf-8") as f:
            for i, t in enumerate(texts):
                f.write(json.dumps({"id": i, "text": t}) + "\n")
    lengths = [len(t.encode("utf-8")) for t in texts]
    env = dict(os.environ, PYTHONPATH=args.pythonpath)
    cmd = [sys.executable, "-m", "neardup", "audit", str(path), "--max-docs", "10000000", "--sample", "2000"]
    run_measured(cmd + ["--max-bytes", "1M"], env=env)  # compiles
    result = {**run_header(sys.argv), "corpus": str(path), "corpus_bytes": path.stat().st_size, "runs": []}
    for s in args.sizes.split(","):
        limit = size(s)
        read, total = 0, 0
        for n in lengths:
            if total + n > limit:
                break
            total += n
            read += 1
        r = run_measured(cmd + ["--max-bytes", s], env=env)
        if r["returncode"]:
            raise SystemExit(r["stderr_tail"])
        entry = {"max_bytes": s, "documents": read, "text_bytes": total, "peak_memory_bytes": r["peak_memory_bytes"],
                 "peak_per_text_byte": round(r["peak_memory_bytes"] / total, 2), "wall_s": round(r["wall_s"], 1),
                 "command": r["command"]}
        result["runs"].append(entry)
        print(f"--max-bytes {s:>6}: {read:,} docs, {total / 2**20:,.0f} MiB of text, peak "
              f"{r['peak_memory_bytes'] / 2**20:,.0f} MiB ({entry['peak_per_text_byte']}x), {r['wall_s']:.0f} s", flush=True)
    result["load_average_at_end"] = list(os.getloadavg())
    write_json(args.output, result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
