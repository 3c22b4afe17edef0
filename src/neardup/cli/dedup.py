"""``neardup dedup``: argument parsing and the end-of-run summary."""

from __future__ import annotations

import contextlib
import sys

from .formatting import HelpFormatter
from ..params import DEFAULT_MIN_RECALL


def register(sub) -> None:
    p = sub.add_parser(
        "dedup", help="remove near-duplicate documents from files",
        description="Remove near-duplicate documents. Reads JSONL (.jsonl, .json), CSV (.csv) and TSV "
                    "(.tsv) with a header line, each also gzip (.gz) or zstd (.zst) compressed, Parquet, "
                    "or plain text files (one document per file), writes the kept corpus and a record of "
                    "every removal to --output.",
        formatter_class=HelpFormatter)
    p.add_argument("inputs", nargs="+", metavar="INPUT",
                   help="files, folders (read recursively in sorted path order) or globs; each is a path, "
                        "never a text (a missing one is an error)")
    p.add_argument("--output", "-o", required=True, metavar="DIR",
                   help="output folder: kept/, removed.parquet, clusters.parquet, stats.json, report.html")
    g = p.add_argument_group("similarity")
    g.add_argument("--threshold", type=float, default=0.8,
                   help="Jaccard similarity of the shingle sets at or above which two documents are near-duplicates")
    g.add_argument("--num-perm", type=int, default=128, help="MinHash signature length k")
    g.add_argument("--bands", type=int, default=None,
                   help="LSH bands b (with --rows; default: chosen so that P(candidate) >= --min-recall at the threshold)")
    g.add_argument("--rows", type=int, default=None, help="LSH rows per band r (with --bands; b*r <= num-perm)")
    g.add_argument("--min-recall", type=float, default=DEFAULT_MIN_RECALL,
                   help="when choosing bands and rows: the least probability of finding a pair at exactly the threshold")
    g.add_argument("--ngram", type=int, default=5, help="tokens per shingle (words, or characters with --char-ngrams)")
    g.add_argument("--char-ngrams", action="store_true", help="shingle on characters instead of words")
    g.add_argument("--no-nfkc", dest="normalize_unicode", action="store_false",
                   help="skip Unicode NFKC normalisation")
    g.add_argument("--no-lowercase", dest="lowercase", action="store_false", help="keep letter case")
    g.add_argument("--punctuation", choices=["split", "delete", "keep"], default="split",
                   help="what punctuation does to words: split them like white space (well-known -> well known), "
                        "be deleted inside them (well-known -> wellknown), or be kept, each mark a token")
    g.add_argument("--keep-punctuation", dest="punctuation", action="store_const", const="keep",
                   help="the old spelling of --punctuation keep")
    g.add_argument("--keep-whitespace", dest="collapse_whitespace", action="store_false",
                   help="with --char-ngrams: keep every white-space character instead of collapsing runs to one space")
    g.add_argument("--verify", choices=["exact", "estimate", "none"], default="exact",
                   help="check candidate pairs by exact Jaccard of shingle sets, by the signature estimate, or not at all")
    g.add_argument("--max-anchor-rounds", type=int, default=8,
                   help="how often members of a bucket that failed against its anchor are re-anchored")
    g.add_argument("--seed", type=int, default=42, help="seed of shingle hashes, permutations and band keys")
    g = p.add_argument_group("input and output")
    g.add_argument("--text-column", default="text", help="field holding the text in JSONL, Parquet and CSV/TSV input")
    g.add_argument("--id-column", default=None,
                   help="field holding a unique document id (default: an 'id' field when every input has "
                        "one, else FILE:LINE for JSONL, FILE:ROW for Parquet and CSV, the path for text files)")
    g.add_argument("--keep", default="first",
                   help="which document of a cluster to keep: first (input order), longest, or score:COLUMN (highest)")
    g.add_argument("--on-error", choices=["fail", "skip"], default="fail",
                   help="on a bad record: stop with exit code 2, or skip it into rejected.parquet")
    g.add_argument("--output-format", choices=["same", "jsonl", "parquet"], default="same",
                   help="format of the files in kept/")
    g.add_argument("--batch-size", type=int, default=8192, help="documents per batch through the kernels")
    g = p.add_argument_group("execution")
    g.add_argument("--workers", type=int, default=None,
                   help="threads for the compiled kernels and for Arrow's parsing (default: every core)")
    g.add_argument("--engine", choices=["local", "ray"], default="local",
                   help="run on this machine, or on a Ray cluster (pip install 'neardup[ray]')")
    g.add_argument("--ray-address", default=None,
                   help="with --engine ray: address of a running cluster (default: start a local Ray instance)")
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
    g = p.add_argument_group("indexes")
    g.add_argument("--against", action="append", default=[],
                   help="an index (folder or redis://HOST:PORT/DB, see 'neardup index') of documents kept before: "
                        "a document that is a near-duplicate of an indexed one is removed, the indexed one named "
                        "as its representative; may be given several times")
    g.add_argument("--update-index", action="store_true",
                   help="after a successful run, add the kept documents to the first --against index "
                        "(one new segment)")
    p.set_defaults(func=run_dedup)


CONFIG_ARGS = ("threshold", "num_perm", "bands", "rows", "min_recall", "ngram", "char_ngrams", "normalize_unicode",
               "lowercase", "punctuation", "collapse_whitespace", "verify", "max_anchor_rounds", "seed",
               "text_column", "id_column", "keep", "on_error", "output_format", "batch_size", "workers", "engine",
               "ray_address", "against", "update_index")


def run_dedup(args) -> int:
    from ..api import dedup, format_summary
    from ..progress import compiling
    options = {k: getattr(args, k) for k in CONFIG_ARGS}
    cold = not args.quiet and kernels_cold()
    with compiling(COMPILING_NOTICE) if cold else contextlib.nullcontext():
        result = dedup(args.inputs, output=args.output, work_dir=args.work_dir, resume=args.resume,
                       overwrite=args.overwrite, quiet=args.quiet, paths=True, **options)
    if not args.quiet:
        print(format_summary(result.stats, result.output), file=sys.stderr)
    problem = all_rejected(result)
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


def all_rejected(result) -> str:
    """The one-line error of a run that read input but rejected every record (with
    ``--on-error skip`` it would otherwise look like a success that kept nothing), or ''."""
    c = result.stats["counts"]
    if not c["input"] or c["kept"] + c["removed"] or c["rejected"] != c["input"]:
        return ""
    line = f"every record was rejected ({c['rejected']:,} of {c['input']:,}; see {result.output}/rejected.parquet)"
    rejected = result.rejected
    if rejected is not None and rejected.num_rows:
        from ..io.sources import detect_format
        first = rejected.slice(0, 1).to_pylist()[0]
        where, row = first.get("source") or "?", first.get("row")
        if row is not None:  # the numbering of the error messages: JSONL lines from 1, rows from 0
            fmt = detect_format(where)[0]
            where = f"{where}:{row + 1}" if fmt == "jsonl" else where if fmt == "text" else f"{where}: row {row}"
        line += f"; the first: {where}: {first.get('reason')}"
    return line
