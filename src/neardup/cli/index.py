"""``neardup index``: build, query, inspect and compact a persistent near-duplicate index.

This module parses the arguments, calls the public API (:mod:`neardup.api`, imported when a
command runs: the parser starts without it) and prints; the work is :mod:`neardup.index`'s.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import List

from ..config import Shingling, Similarity, Sketch
from .formatting import HelpFormatter
from .options import add_options, config_options

S = argparse.SUPPRESS

INDEX_HELP = "the index: a local folder, or redis://HOST:PORT/DB for one on a Redis server"


def register(sub) -> None:
    p = sub.add_parser(
        "index", help="a persistent index of documents to deduplicate new ones against",
        description="Build and use a persistent near-duplicate index (a folder, or redis://HOST:PORT/DB). "
                    "Each add writes new immutable segments and switches the manifest atomically: an "
                    "add is all or nothing, even if the process is killed.",
        formatter_class=HelpFormatter)
    sub2 = p.add_subparsers(dest="index_command", metavar="ACTION",
                            help="add, query, remove, stats, verify or compact; 'neardup index ACTION --help' for each")
    sub2.required = True
    _add_parser(sub2)
    _query_parser(sub2)
    _remove_parser(sub2)
    _inspection_parsers(sub2)


def _add_parser(sub2) -> None:
    a = sub2.add_parser("add", help="add documents (creates the index if needed)",
                        description="Add documents as they are (typically the kept/ folder of a dedup run). "
                                    "A new index records the parameters given here (defaults: those of "
                                    "neardup dedup); an existing one refuses parameters that differ from its own.",
                        formatter_class=HelpFormatter)
    a.add_argument("index", metavar="INDEX", help=INDEX_HELP)
    a.add_argument("inputs", nargs="+", metavar="INPUT", help="files, folders or globs, read like neardup dedup's")
    a.add_argument("--name", default=None, metavar="SOURCE",
                   help="source name recorded with every document (default: each document's file name); "
                        "positional ids then read NAME/FILE:LINE, distinct from another dump's")
    names = _io_args(a)
    g = a.add_argument_group("parameters (for a new index; checked against an existing one)")
    names += add_options(g, Sketch, Similarity, Shingling, given_only=True)
    names += add_options(a, "input_format", given_only=True)
    g.add_argument("--verify", choices=["exact", "estimate"], default=S,
                   help="what a new index keeps to verify candidates: shingle fingerprints (exact, default) "
                        "or signatures (estimate)")
    g.add_argument("--kind", choices=["exact", "bloom"], default=None,
                   help="exact (default for a new index): band keys, ids and what verifies each candidate, about "
                        "1.5 KB a document; a match names the indexed document and its verified similarity. bloom: "
                        "one Bloom filter per band per segment, about 78 bytes a document at 18 bands; a match is a "
                        "yes (an unverified LSH candidate, or a filter's false positive) without a representative. "
                        "An existing index of the other kind is refused")
    g.add_argument("--false-positive-rate", type=float, default=None, metavar="P",
                   help="a new bloom index: the false-positive rate each filter is sized for (default "
                        "1e-4 / (bands x 100): the index-wide extra rate, about bands x segments x P, stays below "
                        "1e-4 up to 100 segments)")
    a.set_defaults(func=run_add, config_names=names + ["verify"])


def _query_parser(sub2) -> None:
    q = sub2.add_parser("query", help="the matches of each document in the index",
                        description="For each input document, every indexed document whose verified similarity "
                                    "is at least the threshold (id, source, similarity), most similar first. A bloom "
                                    "index answers yes with one match of empty id, source bloom:INDEX and "
                                    "similarity null (nothing verified, so --threshold is refused), no with none.",
                        formatter_class=HelpFormatter)
    q.add_argument("index", metavar="INDEX", help=INDEX_HELP)
    q.add_argument("inputs", nargs="+", metavar="INPUT", help="files, folders or globs")
    q.add_argument("--output", "-o", default=None, metavar="FILE",
                   help="FILE.jsonl or FILE.parquet, written whole or not at all (default: JSON lines on "
                        "standard output); an existing FILE is refused unless --overwrite, an input always")
    q.add_argument("--overwrite", action="store_true",
                   help="replace FILE if it exists (never when it is one of the inputs)")
    names = add_options(q, "threshold", given_only=True) + _io_args(q)
    q.set_defaults(func=run_query, config_names=names)


def _remove_parser(sub2) -> None:
    r = sub2.add_parser("remove", help="remove documents by id or by source (takedowns, an expiring dump)",
                        description="Remove documents from an index: those whose id is listed in --ids FILE "
                                    "(every document of the id) and every document added under --source NAME. "
                                    "They never match again; the others are untouched. All of them disappear at "
                                    "once for every reader, or none (a killed removal leaves the index as it "
                                    "was). The space is given back by 'neardup index compact'. A Bloom index keeps "
                                    "no ids: it removes whole sources (--source), dropping the segments that hold "
                                    "only their documents.",
                        formatter_class=HelpFormatter)
    r.add_argument("index", metavar="INDEX", help=INDEX_HELP)
    r.add_argument("--ids", default=None, metavar="FILE",
                   help="a UTF-8 file of ids to remove, one a line (blank lines and a byte-order mark are "
                        "skipped); an id the index "
                        "does not hold is counted, not an error")
    r.add_argument("--source", action="append", default=None, metavar="NAME",
                   help="remove every document added under this source name (index add --name, or the input "
                        "file's name, see 'neardup index stats --full'); a NAME ending in / names every source in that "
                        "folder (dump2/ for dump2/a.jsonl, dump2/b.jsonl); may be given several times; a name "
                        "the index does not have is an error")
    r.set_defaults(func=run_remove)


def _inspection_parsers(sub2) -> None:
    """stats, verify and compact: an index and nothing else."""
    s = sub2.add_parser("stats", help="documents, segments, sources, bytes per document, parameters",
                        description="Print, as JSON, what an index holds: documents, segments, the number of "
                                    "sources and the 10 largest, bytes in all, per document and per file, and its "
                                    "parameters (a few dozen lines, whatever the number of sources).",
                        formatter_class=HelpFormatter)
    s.add_argument("index", metavar="INDEX", help=INDEX_HELP)
    s.add_argument("--full", action="store_true",
                   help="list every source with its documents (\"sources\"; one line a source: an index "
                        "fed a folder has one per file) instead of the count and the 10 largest")
    s.set_defaults(func=run_stats)

    v = sub2.add_parser("verify", help="read every segment file and check it against the manifest",
                        description="Read every file of every segment and check it: present, of the size and "
                                    "CRC-32 the manifest records, and consistent with the others. Prints one line "
                                    "per problem (segment and file) and exits with status 2 when there is one, "
                                    "0 when the index is sound. Queries check each file once per process, when "
                                    "first used; this checks everything now.",
                        formatter_class=HelpFormatter)
    v.add_argument("index", metavar="INDEX", help=INDEX_HELP)
    v.set_defaults(func=run_verify)

    c = sub2.add_parser("compact", help="merge the segments (queries answer the same afterwards)",
                        description="Merge an index's segments into as few as the size bounds allow (one per "
                                    "million documents), keeping the documents' order, so that every query "
                                    "answers exactly as before. Safe while others query.",
                        formatter_class=HelpFormatter)
    c.add_argument("index", metavar="INDEX", help=INDEX_HELP)
    c.set_defaults(func=run_compact)


# where an index reads its input unlike a dedup run: the help of those options here
INDEX_HELP_OF = {"id_column": "field holding the document id (default: an 'id' field when every input has one, "
                              "else positions; '' for positions): an add's positions are FILE:LINE / FILE:ROW with "
                              "FILE the path as given, or a text file's path (with --name NAME: NAME/FILE:LINE, "
                              "FILE below the inputs' folder); a query names its documents as dedup does",
                 "workers": "threads for the compiled kernels (default: every core)"}


def _io_args(p) -> List[str]:
    """The input group: where the text and ids are (arguments of the add and of the query) and
    the execution options; returns the names of the latter (options of the index's Config)."""
    g = p.add_argument_group("input")
    add_options(g, "text_column", "id_column", "on_error", help=INDEX_HELP_OF)
    return add_options(g, "workers", "batch_size", given_only=True, help=INDEX_HELP_OF)


def run_add(args) -> int:
    from ..api import add_files, plural, rate_warning
    from .dedup import compile_notice
    with compile_notice():
        index, result = add_files(args.index, args.inputs, name=args.name, text_column=args.text_column,
                                  id_column=args.id_column, on_error=args.on_error, kind=args.kind,
                                  false_positive_rate=args.false_positive_rate, **config_options(args))
    stats = index.stats()
    print(f"added {result['added']} {plural(result['added'], 'document')} ({result['empty']} empty, "
          f"{result['rejected']} rejected) to {index.display} in {result['seconds']} s: {stats['documents']} "
          f"{plural(stats['documents'], 'document')} in {stats['segments']} {plural(stats['segments'], 'segment')}, "
          f"{stats['bytes_per_document']} bytes per document"
          + (f", extra false-positive rate {stats['extra_false_positive_rate']:.2e}" if stats["kind"] == "bloom" else ""),
          file=sys.stderr)
    for note in result.get("notes", []):
        print(f"neardup: note: {note}", file=sys.stderr)
    warning = rate_warning(stats)
    if warning:
        print(f"neardup: warning: {warning}", file=sys.stderr)
    return 0


def run_query(args) -> int:
    from ..api import plural, query_files
    from .dedup import compile_notice
    options = config_options(args)
    threshold = options.pop("threshold", None)
    with compile_notice():
        answers = query_files(args.index, args.inputs, output=args.output, overwrite=args.overwrite,
                              threshold=threshold, text_column=args.text_column, id_column=args.id_column,
                              on_error=args.on_error,
                              note=lambda note: print(f"neardup: note: {note}", file=sys.stderr), **options)
    if args.output is None:
        for record in answers.records:
            print(json.dumps(record))
    else:
        n = len(answers.records)
        print(f"{answers.found} of {n} {plural(n, 'document')} {'has' if n == 1 else 'have'} a match in "
              f"{answers.index.display}; wrote {args.output}", file=sys.stderr)
    for warning in (answers.truncation_note, answers.rate_warning):
        if warning:
            print(f"neardup: warning: {warning}", file=sys.stderr)
    return 0


def run_remove(args) -> int:
    from ..api import plural, remove_documents
    from ..errors import ConfigError
    if args.ids is None and not args.source:
        raise ConfigError("index remove needs --ids FILE or --source NAME (or both)")
    index, r = remove_documents(args.index, ids_file=args.ids, sources=args.source)
    what = []
    if args.ids is not None:
        what.append(f"{r['ids_found']} of {r['ids_given']} ids found")
    if args.source:
        what.append("source" + ("s " if len(args.source) > 1 else " ") + ", ".join(args.source))
    stats = index.stats()
    if index.store == "bloom":  # its segments are dropped whole: nothing awaits compaction
        after = f"{r['segments']} {plural(r['segments'], 'segment')} of filters dropped"
    else:
        after = f"{stats['removed']} removed awaiting 'neardup index compact'"
    print(f"removed {r['removed']} {plural(r['removed'], 'document')} from {index.display} ({'; '.join(what)}) in "
          f"{r['seconds']} s: {stats['documents']} {plural(stats['documents'], 'document')} left, {after}",
          file=sys.stderr)
    return 0


def run_stats(args) -> int:
    from ..api import Index
    print(json.dumps(Index(args.index, must_exist=True).stats(full=args.full), indent=2))
    return 0


def run_verify(args) -> int:
    from ..api import Index, plural
    from ..errors import StorageError
    index = Index(args.index, must_exist=True)
    r = index.verify()
    for problem in r["problems"]:
        print(problem)
    if r["problems"]:
        n = len(r["problems"])
        raise StorageError(f"index {index.display} is damaged: {n} problem{'s' if n > 1 else ''} (listed above); "
                           f"queries and compaction refuse the damaged segments: restore the index from a backup "
                           f"or build it again")
    print(f"{index.display} is sound: {r['segments']} {plural(r['segments'], 'segment')}, {r['documents']} "
          f"{plural(r['documents'], 'document')}, {r['bytes']} {plural(r['bytes'], 'byte')} checked")
    return 0


def run_compact(args) -> int:
    from ..api import Index, plural
    index = Index(args.index, must_exist=True)
    r = index.compact()
    print(f"compacted {index.display}: {r['segments_before']} {plural(r['segments_before'], 'segment')} -> "
          f"{r['segments_after']} in {r['seconds']} s", file=sys.stderr)
    return 0
