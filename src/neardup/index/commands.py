"""The work of ``neardup index add``, ``query`` and ``remove`` on files, for a caller that parses
their arguments and prints (:mod:`neardup.cli.index`, through :mod:`neardup.api`).

:func:`add_files` adds input files to an index; :func:`rate_warning` says when a Bloom index has
grown past the false-positive rate its filters were designed for; :func:`query_files` answers
for every document of input files, and writes the answers to the output file when one is named
(checked before any work, written whole: :mod:`neardup.io.storage.outfile`);
:func:`remove_documents` removes the documents whose ids an ids file lists, or of whole sources.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Callable, List, Optional, Sequence, Tuple

import pyarrow as pa

from .. import io as nio
from ..errors import ConfigError
from ..io.storage.outfile import check_output_file, publish_with
from ..io.storage.paths import redact
from ..progress import check_interrupt, commit_point
from .bloom import INDEX_RATE, rate_note
from .core import Index
from .inputs import source_batches
from .removal import read_ids_file

OUTPUT_SUFFIXES = (".jsonl", ".parquet")


class InputPath(str):
    """An input named on a command line: always a path (or URL), never a text; kept as typed
    (``pathlib`` would turn ``s3://b/x`` into ``s3:/b/x``)."""

    def __fspath__(self) -> str:
        return str(self)


def add_files(location, inputs: Sequence[str], *, name: Optional[str] = None, text_column: str = "text",
              id_column: Optional[str] = None, on_error: str = "fail", kind: Optional[str] = None,
              false_positive_rate: Optional[float] = None, **options) -> Tuple[Index, dict]:
    """Adds the documents of ``inputs`` (files, folders or globs, read like ``neardup dedup``'s)
    to the index at ``location``, made when new (``kind``, ``false_positive_rate`` and
    ``options``, :class:`~neardup.config.Config` fields, as :class:`Index` takes them). A missing
    input fails before the index is touched. Returns the index and the add's counts
    (:meth:`Index.add`). ``input_format="signatures"``: the signature files of ``neardup
    signatures`` instead of texts (:mod:`.signature_inputs`)."""
    input_format = options.pop("input_format", "auto")
    if input_format in ("signatures", "rpv2-minhash"):
        from .signature_inputs import add_signature_files
        return add_signature_files(location, inputs, input_format=input_format, name=name, id_column=id_column,
                                   on_error=on_error, kind=kind, false_positive_rate=false_positive_rate,
                                   options=options)
    if input_format != "auto":
        raise ConfigError(f"index add reads --input-format auto or signatures, not {input_format}")
    nio.discover(inputs)
    index = Index(location, kind=kind, false_positive_rate=false_positive_rate, **options)
    result = index.add([InputPath(p) for p in inputs], name=name, text_column=text_column, id_column=id_column,
                       on_error=on_error)
    return index, result


def rate_warning(stats: dict) -> Optional[str]:
    """One line when a Bloom index (its :meth:`Index.stats`) answers yes for a document with no
    near-duplicate there more often than the rate its filters were designed for; else None."""
    if stats["kind"] != "bloom" or stats["extra_false_positive_rate"] <= INDEX_RATE:
        return None
    return (f"the extra false-positive rate of {stats['location']} is {stats['extra_false_positive_rate']:.2e}, "
            f"above {INDEX_RATE:g}: a document with no near-duplicate there is removed at that rate "
            f"({stats['segments']} segments of filters at {stats['false_positive_rate']:.2e}); start a new index "
            f"for further adds, or give it a lower --false-positive-rate")


@dataclass
class QueryAnswers:
    """What :func:`query_files` found. ``records``: one per input document, in input order,
    ``{"id", "source", "matches": [{"id", "source", "similarity"}, ...]}`` (an output line of
    ``neardup index query``); ``truncation_note``: :meth:`Index.truncation_note`; ``rate_warning``: a Bloom index's extra false-positive
    rate when above INDEX_RATE."""

    index: Index
    records: List[dict]
    truncation_note: Optional[str]
    rate_warning: Optional[str] = None  # a Bloom index's F above INDEX_RATE (:func:`.bloom.rate_note`)

    @property
    def found(self) -> int:
        """The input documents with at least one match."""
        return sum(1 for r in self.records if r["matches"])


def query_files(location, inputs: Sequence[str], *, output: Optional[str] = None, overwrite: bool = False,
                threshold: Optional[float] = None, text_column: str = "text", id_column: Optional[str] = None,
                on_error: str = "fail", note: Optional[Callable[[str], None]] = None, **options) -> QueryAnswers:
    """The matches in the index at ``location`` of every document of ``inputs`` (see
    :meth:`Index.query`). ``output``: a ``.jsonl`` or ``.parquet`` file to write them to, checked
    before any work (never an input, an existing file only with ``overwrite``) and written whole.
    ``note`` is given, before the queries run, the line of :meth:`Index.recall_note` when the
    threshold is below the one the index's bands and rows were chosen for. Under the command
    line's signal handler a signal stops the queries at the next batch, before any answer is
    written; once they are done, the answers are written (or returned to be printed) whatever
    signal comes."""
    if output is not None and not output.endswith(OUTPUT_SUFFIXES):
        raise ConfigError(f"--output must end in .jsonl or .parquet, got {redact(output)!r}")
    sources = nio.discover(inputs)
    if output is not None:
        check_output_file(output, inputs=[s.path for s in sources],
                          inside=[i for i in inputs if os.path.isdir(i)], overwrite=overwrite)
    index = Index(location, must_exist=True, **options)
    if output is not None:
        index.storage.refuse_output(output, "--output")
    recall = index.recall_note(threshold) if index.store != "bloom" else None  # a bloom index refuses a threshold
    if recall and note is not None:
        note(recall)
    records = []
    for texts, ids, source in source_batches(sources, None, text_column, id_column, on_error,
                                             index.config.batch_size, SimpleNamespace(rejected=0)):
        check_interrupt()
        for doc_id, matches in zip(ids.to_pylist(), index.query(texts, threshold=threshold)):
            records.append({"id": doc_id, "source": source,
                            "matches": [{"id": m.id, "source": m.source, "similarity": m.similarity}
                                        for m in matches]})
    answers = QueryAnswers(index, records, index.truncation_note(),
                           rate_note(index.display, index.snapshot()) if index.store == "bloom" else None)
    commit_point()  # every answer found: written (or printed) whole from here on
    if output is not None:
        _write_answers(output, records, overwrite)
    return answers


def _write_answers(path: str, records: List[dict], overwrite: bool) -> None:
    """The records as JSON lines or a Parquet table (by the name's suffix), written whole."""

    def write(tmp: str) -> None:
        if path.endswith(".parquet"):
            import pyarrow.parquet as pq
            match_type = pa.list_(pa.struct([("id", pa.string()), ("source", pa.string()),
                                             ("similarity", pa.float64())]))
            table = pa.table({"id": pa.array([r["id"] for r in records], pa.string()),
                              "source": pa.array([r["source"] for r in records], pa.string()),
                              "matches": pa.array([r["matches"] for r in records], match_type)})
            pq.write_table(table, tmp, compression="zstd")
        else:
            with open(tmp, "w") as f:
                for r in records:
                    f.write(json.dumps(r) + "\n")

    publish_with(path, write, overwrite=overwrite)


def remove_documents(location, *, ids_file: Optional[str] = None,
                     sources: Optional[Sequence[str]] = None) -> Tuple[Index, dict]:
    """Removes from the index at ``location`` the documents whose ids ``ids_file`` lists (one a
    line, UTF-8) and those of ``sources`` (:meth:`Index.remove`). Returns the index and the
    removal's counts."""
    ids = read_ids_file(ids_file) if ids_file is not None else None
    index = Index(location, must_exist=True)
    return index, index.remove(ids=ids, source=sources)
