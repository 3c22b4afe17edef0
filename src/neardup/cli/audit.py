"""``neardup audit``: the measured S-curve of a corpus against the theory."""

from __future__ import annotations

import argparse
import json
import sys

from ..config import Config, Input, Shingling, Similarity, Sketch
from ..errors import ConfigError, InputError
from .formatting import HelpFormatter
from .options import add_options, config_options


def redact(text: str) -> str:
    from ..io.storage.fs import redact as hide  # not loaded for other commands
    return hide(str(text))


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
    from ..report.audit import audit_texts, format_audit, plot_audit  # not loaded for other commands
    from ..report.audit_files import read_texts
    cfg = Config(**config_options(args))
    if args.plot:
        from ..report.plots import plot_format, require_matplotlib
        plot_format(args.plot)
        require_matplotlib()  # fail before the work, not after it
    for name in ("sample", "bins", "max_docs", "max_bytes"):
        v = getattr(args, name)
        if v is not None and v < 1:
            raise ConfigError(f"--{name.replace('_', '-')} must be at least 1, got {v}")
    _check_targets(args)
    id_column = args.id_column
    if id_column is None or id_column == "":  # as the dedup does (neardup.io.choose_id_column)
        from ..io import choose_id_column, discover
        id_column = choose_id_column(discover(args.inputs), id_column)[0]
    limits: dict = {}
    texts, ids = read_texts(args.inputs, text_column=args.text_column, max_docs=args.max_docs,
                            on_error=args.on_error, id_column=id_column, with_ids=True, max_bytes=args.max_bytes,
                            limits=limits)
    cut = limits.get("cut")
    if len(texts) < 2:
        why = f" (--max-bytes {args.max_bytes:,} stopped the reading)" if cut == "max_bytes" else ""
        raise InputError(f"the audit needs at least 2 documents; read {len(texts)} from "
                         f"{redact(', '.join(args.inputs))}{why}")
    if cut:
        bound = f"--max-docs {args.max_docs:,}" if cut == "max_docs" else f"--max-bytes {args.max_bytes:,}"
        print(f"neardup: audit of the first {len(texts):,} documents ({bound}; the rest is not read)",
              file=sys.stderr)
    result = audit_texts(texts, cfg, sample=args.sample, bins=args.bins, ids=ids)
    if args.json == "-":
        print(json.dumps(result.to_dict(), indent=1))
    else:
        print(format_audit(result))
    if args.json and args.json != "-":
        from ..io.storage.outfile import publish_file
        publish_file(args.json, json.dumps(result.to_dict(), indent=1).encode("utf-8"),
                     overwrite=args.overwrite, option="--json")
        print(f"wrote {redact(args.json)}")
    if args.plot:
        plot_audit(result, args.plot, overwrite=args.overwrite)
        print(f"wrote {redact(args.plot)}", file=sys.stderr if args.json == "-" else sys.stdout)
    return 0


# `neardup audit` holds about 12 bytes per byte of text at its peak (the texts, their shingle
# hashes, signatures, the pool of pairs; measured: bench/results/audit_memory.json), so the default
# bound on the text it reads keeps it under 2 GB.
MAX_BYTES = 96 << 20
_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}


def _size(text: str) -> int:
    """A size in bytes: 1000, 500K, 128M, 2G (powers of 1024; a trailing B or iB is allowed)."""
    import re
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([KMGT]?)(?:i?B)?\s*", text, re.IGNORECASE)
    if not m:
        raise argparse.ArgumentTypeError(f"not a size: {text!r} (give bytes, or a number with K, M, G or T)")
    return int(float(m.group(1)) * _UNITS[m.group(2).upper()])


def _check_targets(args: argparse.Namespace) -> None:
    """Before any work: --json FILE and --plot FILE name new files (or, with --overwrite, files
    that are not the command's inputs), outside the input folders, in folders that exist, and
    not the same file twice. One-line ConfigError otherwise."""
    from ..io import discover
    from ..io.storage.outfile import check_output_file, same_file as _same_file
    targets = [(opt, path) for opt, path in (("--json", args.json), ("--plot", args.plot))
               if path and path != "-"]
    if not targets:
        return
    files = [s.path for s in discover(args.inputs) if s.format != "table"]
    for opt, path in targets:  # (URLs: never a local input; as a target, refused)
        check_output_file(path, inputs=list(args.inputs) + files, inside=args.inputs, overwrite=args.overwrite,
                          option=opt)
    if len(targets) == 2 and _same_file(targets[0][1], targets[1][1]):
        raise ConfigError(f"--json and --plot name the same file {redact(args.json)}; name two files")
