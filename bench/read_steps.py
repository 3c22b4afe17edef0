"""The JSONL read stage's first steps on the blocks of a file (16 MiB, cut at newlines as the
reader does): the line bounds and the UTF-8 check of each block, this tree's
(``line_bounds_ascii``, then ``_utf8_ok`` only for a block that is not ASCII) against those of
another source tree (``line_bounds`` then ``_utf8_ok``), interleaved in one process; CPU seconds
(``time.process_time``), min and median of ``--repeat`` passes.

    PYTHONPATH=src python bench/read_steps.py --input bench/data/synth_100000_s0.jsonl \\
        --before /work/main/src --out bench/results/read_steps_100k.json
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import sys
import time


def _load(path: str, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    mod.__package__ = "neardup.kernels"
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--input", required=True)
    ap.add_argument("--before", required=True, help="the other source tree (its neardup/kernels/lines.py)")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--out", default="bench/results/read_steps.json")
    a = ap.parse_args()
    import neardup.kernels.lines as after  # (also the package the other lines.py is loaded into)
    from neardup.io.formats.jsonl import _utf8_ok
    from neardup.stages.read import tune_malloc
    tune_malloc()
    before = _load(os.path.join(a.before, "neardup", "kernels", "lines.py"), "neardup.kernels._lines_before")
    blocks, rest = [], b""
    with open(a.input, "rb") as f:
        while True:
            c = f.read(16 << 20)
            if not c:
                if rest:
                    blocks.append(rest)
                break
            c = rest + c
            k = c.rfind(b"\n") + 1
            blocks.append(c[:k])
            rest = c[k:]
    for d in blocks[:1] + [b"", b"\n", b"ab", "\u00e9\n".encode()]:
        x, y = before.line_bounds(d), after.line_bounds_ascii(d)
        assert x[0].tolist() == y[0].tolist() and x[1].tolist() == y[1].tolist() and y[2] == d.isascii()
    tb, ta = [], []
    for _ in range(a.repeat):
        s = time.process_time()
        for d in blocks:
            before.line_bounds(d)
            _utf8_ok(d)
        tb.append(time.process_time() - s)
        s = time.process_time()
        for d in blocks:
            if not after.line_bounds_ascii(d)[2]:
                _utf8_ok(d)
        ta.append(time.process_time() - s)
    res = {"input": a.input, "blocks": len(blocks), "command": " ".join(sys.argv),
           "load_after": open("/proc/loadavg").read().split()[:3],
           "before": {"tree": a.before, "cpu_s": [round(t, 4) for t in tb]},
           "after": {"tree": os.path.dirname(os.path.dirname(after.__file__)), "cpu_s": [round(t, 4) for t in ta]}}
    for k in ("before", "after"):
        v = sorted(res[k]["cpu_s"])
        print(f"{k:6s} line bounds + UTF-8 check: min {v[0]:.3f} median {v[len(v) // 2]:.3f} CPU s")
    with open(a.out, "w") as f:
        json.dump(res, f, indent=1)


if __name__ == "__main__":
    main()
