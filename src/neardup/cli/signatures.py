"""``neardup signatures``: the MinHash signature of every document, written as Parquet."""

from __future__ import annotations

import argparse
import sys

from ..config import Shingling
from .formatting import HelpFormatter
from .options import add_options


def register(sub) -> None:
    p = sub.add_parser(
        "signatures", help="write each document's MinHash signature (Parquet)",
        description="Compute the MinHash signature of every document (read as 'neardup dedup' reads it) and "
                    "write id, signature (list<uint32> of num-perm values), shingles and length to "
                    "DIR/part-00000.parquet, ...; the parameters that made the values are in each file's "
                    "key-value metadata ('neardup.signatures'). 'neardup dedup DIR --input-format signatures' "
                    "and 'neardup index add' read them back instead of the texts. The same input and options "
                    "give the same bytes.",
        formatter_class=HelpFormatter)
    p.add_argument("inputs", nargs="+", metavar="INPUT", help="files, folders or globs, as for 'neardup dedup'")
    p.add_argument("--output", "-o", required=True, metavar="DIR",
                   help="a new or empty folder, or one of signatures written before (with --overwrite)")
    p.add_argument("--overwrite", action="store_true", help="replace the signature files of an earlier export")
    names = add_options(p, "num_perm", "seed", Shingling, "text_column", "id_column", "on_error",
                        "follow_symlinks", "workers", "batch_size")
    p.set_defaults(func=run_signatures, config_names=names)


def run_signatures(args: argparse.Namespace) -> int:
    import warnings
    from ..api import redact, signatures
    from ..errors import SkippedWarning
    from .options import config_options
    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always", SkippedWarning)
        written = signatures(args.inputs, args.output, overwrite=args.overwrite, **config_options(args))
    for w in said:
        if issubclass(w.category, SkippedWarning):
            print(f"neardup: note: {redact(str(w.message))}", file=sys.stderr)
        else:
            warnings.showwarning(w.message, w.category, w.filename, w.lineno)
    print(f"wrote {len(written)} signature file{'s' if len(written) != 1 else ''} to {redact(args.output)}",
          file=sys.stderr)
    return 0
