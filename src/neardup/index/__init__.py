"""A persistent, incremental near-duplicate index: in a folder (append-only segments and an
atomically switched manifest) or on Redis (``redis://HOST:PORT/DB``), behind one storage seam.

:class:`Index` is the public face (``neardup.Index``); :meth:`Index.match` and
:meth:`IndexWriter.add_arrays` are the seam for a pipeline that has hashed its documents already.
"""

from .core import Index, Match, Matches, open_storage
from .manifest import PARAM_NAMES
from .writer import IndexWriter

__all__ = ["Index", "IndexWriter", "Match", "Matches", "PARAM_NAMES", "open_storage"]
