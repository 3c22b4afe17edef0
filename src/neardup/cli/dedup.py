"""``neardup dedup``: argument parsing and the end-of-run summary."""

from __future__ import annotations

import argparse
import contextlib
import sys

from ..config import GROUPS
from .formatting import HelpFormatter
from .options import add_sections, config_options


def register(sub) -> None:
    p = sub.add_parser(
        "dedup", help="remove near-duplicate documents from files",
        description="Remove near-duplicate documents. Reads JSONL (.jsonl, .json), CSV (.csv) and TSV "
                    "(.tsv) with a header line, each also gzip (.gz), zstd (.zst), bz2 (.bz2) or xz (.xz) "
                    "compressed, Parquet, or plain text files (one document per file), writes the kept corpus "
                    "and a record of every removal to --output.",
        formatter_class=HelpFormatter)
    p.add_argument("inputs", nargs="+", metavar="INPUT",
                   help="files, folders (read recursively in sorted path order) or globs; each is a path, "
                        "never a text (a missing one is an error)")
    p.add_argument("--output", "-o", required=True, metavar="DIR",
                   help="output folder: kept/, removed.parquet, clusters.parquet, stats.json, report.html")
    g = add_sections(p, *GROUPS.values())["execution"]
    g.add_argument("--work-dir", default=None, metavar="DIR",
                   help="folder for stage files (default: OUTPUT/.neardup-work, removed after success); must be "
                        "new, empty or a work dir neardup made, and outside the inputs")
    g.add_argument("--overwrite", action="store_true",
                   help="replace the results of an earlier run in --output and discard an earlier run's work in "
                        "the work dir (without it both are refused; folders neardup did not make are always refused)")
    g.add_argument("--resume", action="store_true",
                   help="continue an interrupted run from its last finished stage (same inputs and options: "
                        "otherwise refused, saying what differs)")
    g.add_argument("--quiet", "-q", action="store_true", help="no progress bars and no summary")
    for action in p._actions:  # --verify only where given: the API's default is exact, or estimate for signatures
        if action.dest == "verify":
            action.default = argparse.SUPPRESS
    p.set_defaults(func=run_dedup)


def run_dedup(args) -> int:
    from ..api import compiling, run_dedup as dedup
    options = config_options(args)
    cold = not args.quiet and kernels_cold()
    with compiling(COMPILING_NOTICE) if cold else contextlib.nullcontext():
        result = dedup(args.inputs, output=args.output, work_dir=args.work_dir, resume=args.resume,
                       overwrite=args.overwrite, quiet=args.quiet, paths=True, **options)
    if not args.quiet:
        print(result.summary(), file=sys.stderr)
    problem = result.rejected_everything()
    if problem:
        print(f"neardup: error: {problem}", file=sys.stderr)
        return 2
    return 0


COMPILING_NOTICE = "neardup: compiling the kernels (once per version, 10-40 s; later runs start at once) ..."


def kernels_cold() -> bool:
    """Whether this run compiles the kernels first (the first run of this version): it then says
    so once, when its work starts, and its progress bars show no rate (it would count the
    compile time)."""
    from .. import kernels_cached
    return not kernels_cached()


def compile_notice():
    """For the commands without progress bars (index add, index query, audit): the compile
    notice, said when a kernel actually starts compiling (:class:`neardup.progress.compile_notice`)."""
    from ..api import compile_notice
    return compile_notice(COMPILING_NOTICE)
