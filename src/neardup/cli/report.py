"""``neardup report``: (re)builds report.html of a dedup output folder."""

from __future__ import annotations

import argparse

from .formatting import HelpFormatter


def register(sub) -> None:
    p = sub.add_parser(
        "report", help="(re)build report.html of a dedup output folder",
        description="Build one self-contained HTML page (no external files or scripts) from a "
                    "neardup dedup output folder: counts, parameters, S-curve, similarity and "
                    "cluster-size distributions, and the largest clusters side by side with "
                    "their differences highlighted.",
        formatter_class=HelpFormatter)
    p.add_argument("dir", metavar="DIR", help="the dedup output folder (holds stats.json)")
    p.add_argument("--output", "-o", default=None, metavar="FILE",
                   help="where to write the page (default: DIR/report.html, which is always "
                        "replaced); an existing FILE is replaced only with --overwrite, and never one "
                        "of DIR's files")
    p.add_argument("--overwrite", action="store_true",
                   help="with --output: replace FILE if it exists")
    p.add_argument("--plots", choices=("auto", "matplotlib", "svg"), default="auto",
                   help="images: matplotlib PNGs when installed ('auto'), always matplotlib, or "
                        "simple inline SVG drawn without matplotlib")
    p.set_defaults(func=run_report)


def run_report(args: argparse.Namespace) -> int:
    from ..api import redact, report  # not loaded for other commands
    path = report(args.dir, args.output, plots=args.plots, overwrite=args.overwrite)
    print(f"wrote {redact(str(path))}")
    return 0
