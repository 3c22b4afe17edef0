"""The ids of documents by position (:func:`neardup.stages.corpus.document_ids`): text files'
ids gathered into one array (100,000 files made 100,000 arrays) are the ids, in the documents'
order, that each source's :func:`~neardup.io.columns.positional_ids` gives."""

from __future__ import annotations

import numpy as np

from neardup.io.columns import positional_ids
from neardup.io.sources import make_source
from neardup.stages.corpus import document_ids


def _sources():
    # text files with a JSONL file and a Parquet file among them: runs of text files cut by others
    fmt = ["text", "text", "jsonl", "text", "text", "text", "parquet", "text"]
    return [make_source(f"/in/f{i}", f"/in/f{i}", f"d/f{i}.{f}", f, None, True) for i, f in enumerate(fmt)]


def _expected(sources, source, row, path_of=None):
    return [positional_ids(sources[s], np.array([r]), path_of(sources[s]) if path_of else None)[0].as_py()
            for s, r in zip(source.tolist(), row.tolist())]


def test_ids_of_text_files_among_other_sources_are_in_the_documents_order():
    sources = _sources()
    rng = np.random.default_rng(3)
    source = np.array([0, 1, 2, 2, 3, 4, 5, 6, 6, 7, 2, 0])  # (a file twice: an id each time)
    row = np.array([0, 0, 4, 0, 0, 0, 0, 9, 1, 0, 7, 0])
    perm = rng.permutation(len(source))
    source, row = source[perm], row[perm]
    got = document_ids(source, row, None, sources).to_pylist()
    assert got == _expected(sources, source, row)
    assert got[list(source).index(4)] == "d/f4.text" and got[list(source).index(6)] in ("d/f6.parquet:9",
                                                                                          "d/f6.parquet:1")


def test_ids_of_text_files_take_the_path_given():
    sources = _sources()
    source, row = np.array([7, 3, 2, 0]), np.array([0, 0, 1, 0])

    def path_of(src):
        return "idx/" + src.name.rsplit("/", 1)[1]

    got = document_ids(source, row, None, sources, path_of).to_pylist()
    assert got == ["idx/f7", "idx/f3", "idx/f2:2", "idx/f0"] == _expected(sources, source, row, path_of)
