"""Storage: where bytes are read and written, local or in a store, and the only room that tells
the two apart.

    paths      paths as text: local or URL (:func:`~.paths.is_url`), credentials hidden
               (:func:`~.paths.redact`), join and split
    local      the files on this machine (``os`` calls, renames, ``flock``)
    remote     the files in a store (fsspec), and its errors in one line
    fs         one function per file operation on any path, handed to the files of its kind
    folder     :class:`~.folder.Folder`: a folder neardup owns, carried through a run
               (atomic writes, JSON, tables, ranged reads, listing, locks, publishing whole)
    tables     Arrow and Parquet files (``ParquetRows``: the same rows, the same bytes)
    ranges     ranges of a raw array file and columns of an Arrow file read back
    outfile    one file written where the user says (``-o``, ``--json``, ``--plot``)

Above this room nothing asks whether a path is a URL: it holds a Folder, or asks a question of
capability (:func:`~.paths.os_path`: a path for os calls and memory maps, or None).
"""

from .folder import Folder

__all__ = ["Folder"]
