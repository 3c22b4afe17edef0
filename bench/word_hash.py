"""The tokenise + shingle kernel alone, hash version 1 against 2, in one run: ns per byte.

    .venv/bin/python bench/word_hash.py                     # 100 synthetic documents, 400 rounds
    .venv/bin/python bench/word_hash.py --docs 1000 --rounds 100

Calls the compiled tokenizer (``neardup.kernels.shingles._units``) and the shingle combination
(``_shingles_of``, n = 5) document by document in one thread, for every case: hash version 1 and
2 under ``--punctuation split`` (the default; version 2's ASCII path classes and hashes eight
bytes at a time) and ``delete`` (version 2 goes through the general path there). The cases
alternate round by round and each keeps its fastest round: on a shared machine a round that ran
undisturbed is the kernel's own speed, and the ratios compare cases that saw the same load. The
corpus is neardup.testing.synth's (seed 0, ASCII). MinHash is not included (bench/signatures.py and
bench/before_after.py time it).

Writes bench/results/word_hash.json (``--output``) and prints a table.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numba as nb
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))
from common import RESULTS_DIR, run_header, write_json  # noqa: E402


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--docs", type=int, default=100)
    ap.add_argument("--rounds", type=int, default=400)
    ap.add_argument("--output", type=Path, default=RESULTS_DIR / "word_hash.json")
    args = ap.parse_args(argv)

    import pyarrow as pa

    from neardup.kernels import shingles as sh
    from neardup.config import Shingling
    from neardup.testing.synth import generate_corpus

    @nb.njit
    def run(offsets, data, table, options, h0, units):
        total = 0
        for d in range(offsets.shape[0] - 1):
            m = sh._units(data, offsets[d], offsets[d + 1], table, options, True, True, units)
            total += sh._shingles_of(units, m, 5, h0, units)
        return total

    result = run_header(sys.argv)
    texts = generate_corpus(args.docs, seed=0).texts
    offsets, data = sh.arrow_buffers(pa.array(texts, type=pa.large_string()))
    nbytes = int(offsets[-1] - offsets[0])
    table = sh.char_classes()
    h0 = sh.seed_state(1)
    units = np.empty(int(np.diff(offsets).max()) + 8, np.uint64)
    cases = {f"v{v}-{p}": sh.kernel_options(Shingling(hash_version=v, punctuation=p))
             for p in ("split", "delete") for v in (1, 2)}
    shingles = {name: run(offsets, data, table, o, h0, units) for name, o in cases.items()}  # compile
    best = {name: float("inf") for name in cases}
    for _ in range(args.rounds):
        for name, o in cases.items():
            t0 = time.perf_counter()
            run(offsets, data, table, o, h0, units)
            best[name] = min(best[name], time.perf_counter() - t0)
    result["corpus"] = {"generator": "neardup.testing.synth.generate_corpus", "seed": 0, "docs": args.docs, "bytes": nbytes}
    result["rounds"] = args.rounds
    result["ns_per_byte"] = {name: best[name] / nbytes * 1e9 for name in cases}
    result["shingles"] = shingles
    result["v2_over_v1_speed"] = {p: best[f"v1-{p}"] / best[f"v2-{p}"] for p in ("split", "delete")}
    write_json(args.output, result)
    for name in cases:
        print(f"{name:<10} {result['ns_per_byte'][name]:6.2f} ns/byte")
    print("version 2 / version 1 speed:", {k: round(v, 2) for k, v in result["v2_over_v1_speed"].items()})
    print(f"load average at start: {result['machine'].get('load_average_at_start')}")
    print(f"wrote {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
