"""``neardup params``: the LSH bands and rows for a threshold, with the S-curve."""

from __future__ import annotations

import argparse
import json
import sys

from ..config import Similarity, Sketch
from .formatting import HelpFormatter


def register(sub) -> None:
    p = sub.add_parser(
        "params", help="show the LSH (bands, rows) for a threshold, with its S-curve",
        description="Show which LSH bands x rows neardup would use for a similarity threshold and "
                    "a signature length, and why: the S-curve P(candidate | J) = 1 - (1 - J^r)^b, "
                    "its midpoint, the false-positive and false-negative areas, and alternatives.",
        formatter_class=HelpFormatter)
    p.add_argument("--threshold", type=float, default=Similarity.threshold,
                   help="Jaccard similarity in (0, 1] at or above which two documents are "
                        "near-duplicates")
    p.add_argument("--num-perm", type=int, default=Sketch.num_perm,
                   help="MinHash signature length k (bands x rows must not exceed it)")
    p.add_argument("--bands", type=int, default=None,
                   help="evaluate this number of bands instead of choosing (needs --rows)")
    p.add_argument("--rows", type=int, default=None,
                   help="evaluate this number of rows per band instead of choosing (needs --bands)")
    p.add_argument("--min-recall", type=float, default=Similarity.min_recall,
                   help="the default chooser demands P(candidate | J = threshold) >= MIN_RECALL and then "
                        "takes the fewest false positives (default: %(default)s)")
    p.add_argument("--method", choices=("recall", "weighted"), default="recall",
                   help="'recall': the default chooser above; 'weighted': minimise 0.5 * FP area "
                        "+ 0.5 * FN area (the common optimiser, which favours curves above the "
                        "threshold)")
    p.add_argument("--json", action="store_true",
                   help="print one JSON object instead of the text and the terminal plot")
    p.add_argument("--plot", default=None, metavar="FILE",
                   help="also write the S-curve with the shaded FP/FN areas to FILE (.png or "
                        ".svg; needs matplotlib); written whole, an existing FILE only with --overwrite")
    p.add_argument("--overwrite", action="store_true", help="with --plot: replace an existing FILE")
    p.set_defaults(func=run_params)


def run_params(args: argparse.Namespace) -> int:
    from ..api import params, params_text  # not loaded for other commands
    summary = params(args.threshold, args.num_perm, bands=args.bands, rows=args.rows, min_recall=args.min_recall,
                     method=args.method, plot=args.plot, overwrite=args.overwrite)
    if args.json:
        print(json.dumps(summary, indent=2))
        if args.plot:
            print(f"wrote {args.plot}", file=sys.stderr)
    else:
        print(params_text(summary))
        if args.plot:
            print(f"\nwrote {args.plot}")
    return 0
