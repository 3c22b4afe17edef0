"""``neardup index``: build, query, inspect and compact a persistent near-duplicate index."""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import List

from ..config import Shingling, Similarity, Sketch
from ..progress import plural
from .formatting import HelpFormatter
from .options import add_options, config_options


class InputPath(str):
    """A command-line input: always a path (or URL), never a text; kept as typed (``pathlib``
    would turn ``s3://b/x`` into ``s3:/b/x``)."""

    def __fspath__(self) -> str:
        return str(self)

S = argparse.SUPPRESS


def redact(text: str) -> str:
    from ..io.storage.fs import redact as hide  # imported when used: the parser starts without the io package
    return hide(text)


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

    a = sub2.add_parser("add", help="add documents (creates the index if needed)",
                        description="Add documents as they are (typically the kept/ folder of a dedup run). "
                                    "A new index records the parameters given here (defaults: those of "
                                    "neardup dedup); an existing one refuses parameters that differ from its own.",
                        formatter_class=HelpFormatter)
    a.add_argument("index", metavar="INDEX", help=INDEX_HELP)
    a.add_argument("inputs", nargs="+", metavar="INPUT", help="files, folders or globs, read like neardup dedup's")
    a.add_argument("--name", default=None, metavar="SOURCE",
                   help="source name recorded with every document (default: each document's file name)")
    names = _io_args(a)
    g = a.add_argument_group("parameters (for a new index; checked against an existing one)")
    names += add_options(g, Sketch, Similarity, Shingling, given_only=True)
    g.add_argument("--verify", choices=["exact", "estimate"], default=S,
                   help="what a new index keeps to verify candidates: shingle fingerprints (exact, default) "
                        "or signatures (estimate)")
    g.add_argument("--kind", choices=["exact", "bloom"], default=None,
                   help="exact (default for a new index): band keys, ids and what verifies each candidate, about "
                        "1.5 KB a document; a match names the indexed document and its verified similarity. bloom: "
                        "one Bloom filter per band per segment, about 56 bytes a document; a match is a yes "
                        "(an unverified LSH candidate, or a filter's false positive) without a representative. "
                        "An existing index of the other kind is refused")
    g.add_argument("--false-positive-rate", type=float, default=None, metavar="P",
                   help="a new bloom index: the false-positive rate each filter is sized for (default "
                        "1e-4 / (bands x 100): the index-wide extra rate, about bands x segments x P, stays below "
                        "1e-4 up to 100 segments)")
    a.set_defaults(func=run_add, config_names=names + ["verify"])

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
                   help="a UTF-8 file of ids to remove, one a line (blank lines are skipped); an id the index "
                        "does not hold is counted, not an error")
    r.add_argument("--source", action="append", default=None, metavar="NAME",
                   help="remove every document added under this source name (index add --name, or the input "
                        "file's name, see 'neardup index stats'); a NAME ending in / names every source in that "
                        "folder (dump2/ for dump2/a.jsonl, dump2/b.jsonl); may be given several times; a name "
                        "the index does not have is an error")
    r.set_defaults(func=run_remove)

    s = sub2.add_parser("stats", help="documents, segments, sources, bytes per document, parameters",
                        description="Print, as JSON, what an index holds: documents, segments, documents "
                                    "per source, bytes in all, per document and per file, and its parameters.",
                        formatter_class=HelpFormatter)
    s.add_argument("index", metavar="INDEX", help=INDEX_HELP)
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
                              "else FILE:LINE / FILE:ROW, or the path for text files; '' for those positions)",
                 "workers": "threads for the compiled kernels (default: every core)"}


def _io_args(p) -> List[str]:
    """The input group: where the text and ids are (arguments of the add and of the query) and
    the execution options; returns the names of the latter (options of the index's Config)."""
    g = p.add_argument_group("input")
    add_options(g, "text_column", "id_column", "on_error", help=INDEX_HELP_OF)
    return add_options(g, "workers", "batch_size", given_only=True, help=INDEX_HELP_OF)


def run_add(args) -> int:
    from .. import io as nio
    from ..index import Index
    from ..index.bloom import INDEX_RATE
    nio.discover(args.inputs)  # a missing input fails before the index is touched
    index = Index(args.index, kind=args.kind, false_positive_rate=args.false_positive_rate, **config_options(args))
    result = index.add([InputPath(p) for p in args.inputs], name=args.name, text_column=args.text_column, id_column=args.id_column,
                       on_error=args.on_error)
    stats = index.stats()
    print(f"added {result['added']} {plural(result['added'], 'document')} ({result['empty']} empty, "
          f"{result['rejected']} rejected) to {index.display} in {result['seconds']} s: {stats['documents']} "
          f"{plural(stats['documents'], 'document')} in {stats['segments']} {plural(stats['segments'], 'segment')}, "
          f"{stats['bytes_per_document']} bytes per document"
          + (f", extra false-positive rate {stats['extra_false_positive_rate']:.2e}" if stats["kind"] == "bloom" else ""),
          file=sys.stderr)
    if stats["kind"] == "bloom" and stats["extra_false_positive_rate"] > INDEX_RATE:
        print(f"neardup: warning: the extra false-positive rate of {index.display} is "
              f"{stats['extra_false_positive_rate']:.2e}, above {INDEX_RATE:g}: a document with no near-duplicate "
              f"there is removed at that rate ({stats['segments']} segments of filters at "
              f"{stats['false_positive_rate']:.2e}); start a new index for further adds, or give it a lower "
              f"--false-positive-rate", file=sys.stderr)
    return 0


def run_query(args) -> int:
    import pyarrow as pa

    from .. import io as nio
    from ..errors import ConfigError
    from ..index import Index
    from ..index.inputs import source_batches

    out = args.output
    if out is not None and not out.endswith((".jsonl", ".parquet")):
        raise ConfigError(f"--output must end in .jsonl or .parquet, got {redact(out)!r}")
    sources = nio.discover(args.inputs)
    if out is not None:
        from ..io.storage.outfile import check_output_file
        check_output_file(out, inputs=[s.path for s in sources],
                          inside=[i for i in args.inputs if os.path.isdir(i)], overwrite=args.overwrite)
    options = config_options(args)
    threshold = options.pop("threshold", None)
    index = Index(args.index, must_exist=True, **options)
    note = index.recall_note(threshold) if index.store != "bloom" else None  # a bloom index refuses a threshold
    if note:
        print(f"neardup: note: {note}", file=sys.stderr)

    class Counter:
        rejected = 0

    rows = {"id": [], "source": [], "matches": []}
    for texts, ids, source in source_batches(sources, None, args.text_column, args.id_column, args.on_error,
                                             index.config.batch_size, Counter()):
        for doc_id, matches in zip(ids.to_pylist(), index.query(texts, threshold=threshold)):
            rows["id"].append(doc_id)
            rows["source"].append(source)
            rows["matches"].append([{"id": m.id, "source": m.source, "similarity": m.similarity} for m in matches])
    truncated = index.truncation_note()
    if out is None:
        for i, s, m in zip(rows["id"], rows["source"], rows["matches"]):
            print(json.dumps({"id": i, "source": s, "matches": m}))
        if truncated:
            print(f"neardup: warning: {truncated}", file=sys.stderr)
        return 0
    def write(tmp: str) -> None:
        if out.endswith(".parquet"):
            import pyarrow.parquet as pq
            match_type = pa.list_(pa.struct([("id", pa.string()), ("source", pa.string()),
                                             ("similarity", pa.float64())]))
            table = pa.table({"id": pa.array(rows["id"], pa.string()), "source": pa.array(rows["source"], pa.string()),
                              "matches": pa.array(rows["matches"], match_type)})
            pq.write_table(table, tmp, compression="zstd")
        else:
            with open(tmp, "w") as f:
                for i, s, m in zip(rows["id"], rows["source"], rows["matches"]):
                    f.write(json.dumps({"id": i, "source": s, "matches": m}) + "\n")

    from ..io.storage.outfile import publish_with
    publish_with(out, write, overwrite=args.overwrite)
    found = sum(1 for m in rows["matches"] if m)
    n = len(rows["id"])
    print(f"{found} of {n} {plural(n, 'document')} {'has' if n == 1 else 'have'} a match in {index.display}; "
          f"wrote {out}", file=sys.stderr)
    if truncated:
        print(f"neardup: warning: {truncated}", file=sys.stderr)
    return 0


def run_remove(args) -> int:
    from ..errors import ConfigError
    from ..index import Index
    from ..index.removal import read_ids_file
    if args.ids is None and not args.source:
        raise ConfigError("index remove needs --ids FILE or --source NAME (or both)")
    ids = read_ids_file(args.ids) if args.ids is not None else None
    index = Index(args.index, must_exist=True)
    r = index.remove(ids=ids, source=args.source)
    what = []
    if ids is not None:
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
    from ..index import Index
    print(json.dumps(Index(args.index, must_exist=True).stats(), indent=2))
    return 0


def run_verify(args) -> int:
    from ..errors import StorageError
    from ..index import Index
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
    from ..index import Index
    index = Index(args.index, must_exist=True)
    r = index.compact()
    print(f"compacted {index.display}: {r['segments_before']} {plural(r['segments_before'], 'segment')} -> "
          f"{r['segments_after']} in {r['seconds']} s", file=sys.stderr)
    return 0
