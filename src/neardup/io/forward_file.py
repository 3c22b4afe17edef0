"""A binary file read once from its start, as ``pyarrow.PythonFile`` takes one: the Python files
of the readers that wrap a stream (:class:`neardup.io.compressed.StdlibReader`, the CSV reader's
end marker, the first bytes of a file)."""

from __future__ import annotations


class ForwardFile:
    """Readable, not seekable; ``close()`` marks it closed (a subclass closing what it reads
    from calls it too). A subclass gives ``read(n)``."""

    closed = False

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return False

    def close(self) -> None:
        self.closed = True
