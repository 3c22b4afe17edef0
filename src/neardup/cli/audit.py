"""``neardup audit``: the measured S-curve of a corpus against the theory."""

from __future__ import annotations

import argparse
import sys

from ..config import Config, Input, Shingling, Similarity, Sketch
from .formatting import HelpFormatter
from .options import add_options, config_options


def register(sub) -> None:
    p = sub.add_parser(
        "audit", help="measure the real LSH S-curve and the share of missed near-duplicates",
        description="Sample pairs of documents from your corpus across the whole similarity "
                    "range, compute their exact Jaccard similarity and whether the LSH with these "
                    "parameters makes them a candidate pair, and compare the measured candidate "
                    "rate per similarity bin with the theoretical S-curve 1 - (1 - s^r)^b. Reports "
                    "the expected share of near-duplicate pairs a dedup would miss.",
        formatter_class=HelpFormatter)
    p.add_argument("inputs", nargs="+", metavar="INPUT",
                   help="input files or folders (JSONL, Parquet, CSV/TSV, text), as for 'neardup dedup'")
    p.add_argument("--sample", type=int, default=5000,
                   help="pairs to check, spread over the similarity bins (more: tighter intervals), drawn "
                        "with --seed")
    names = add_options(p, Similarity, Sketch, Shingling, Input)
    p.add_argument("--bins", type=int, default=10,
                   help="equal-width similarity bins on [0, 1]")
    p.add_argument("--max-docs", type=int, default=100_000,
                   help="read at most this many documents (the first ones)")
    p.add_argument("--max-bytes", type=_size, default=MAX_BYTES,
                   help="read at most this much text (bytes of UTF-8; 500M, 2G, ... accepted): the audit holds "
                        "about 12 bytes per byte of text, so the default keeps it under 2 GB (default: 96M)")
    p.add_argument("--json", default=None, metavar="FILE",
                   help="also write every number (bins, miss rate, the sampled pairs, named by position "
                        "and by id) to FILE as JSON; '-' prints the JSON instead of the table. FILE must not "
                        "be an input or inside an input folder; an existing FILE is replaced only with "
                        "--overwrite")
    p.add_argument("--plot", default=None, metavar="FILE",
                   help="write measured rates with error bars over the theoretical curve to FILE "
                        "(.png or .svg; needs matplotlib); the same rules as for --json")
    p.add_argument("--overwrite", action="store_true",
                   help="replace the files of --json and --plot if they exist")
    p.set_defaults(func=run_audit, config_names=names)


def run_audit(args: argparse.Namespace) -> int:
    from ..api import audit, redact  # not loaded for other commands
    from .dedup import compile_notice
    to_stdout = args.json == "-"
    with compile_notice():
        result = audit(args.inputs, Config(**config_options(args)), sample=args.sample, bins=args.bins,
                       max_docs=args.max_docs, max_bytes=args.max_bytes, json_file=None if to_stdout else args.json,
                       plot=args.plot, overwrite=args.overwrite,
                       notify=lambda line: print(f"neardup: {line}", file=sys.stderr))
    print(result.to_json() if to_stdout else result.summary())
    if args.json and not to_stdout:
        print(f"wrote {redact(args.json)}")
    if args.plot:
        print(f"wrote {redact(args.plot)}", file=sys.stderr if to_stdout else sys.stdout)
    return 0


# The default of --max-bytes: that of neardup.api.audit (AUDIT_MAX_BYTES; a test checks that they
# agree), written here so that the parser is made without loading the library.
MAX_BYTES = 96 << 20
_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}


def _size(text: str) -> int:
    """A size in bytes: 1000, 500K, 128M, 2G (powers of 1024; a trailing B or iB is allowed)."""
    import re
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([KMGT]?)(?:i?B)?\s*", text, re.IGNORECASE)
    if not m:
        raise argparse.ArgumentTypeError(f"not a size: {text!r} (give bytes, or a number with K, M, G or T)")
    return int(float(m.group(1)) * _UNITS[m.group(2).upper()])
