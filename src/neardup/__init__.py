"""neardup: find and remove near-duplicate documents with MinHash LSH.

>>> import neardup
>>> result = neardup.dedup("corpus.jsonl", output="out", threshold=0.8)   # doctest: +SKIP
>>> result.stats["counts"]                                                # doctest: +SKIP
"""

__version__ = "0.1.0"

from .config import Config  # noqa: E402
from .errors import ConfigError, InputError, NeardupError  # noqa: E402
from .minhash import MinHasher  # noqa: E402
from .params import (candidate_probability, choose_params, false_negative_area,  # noqa: E402
                     false_positive_area, midpoint)


def dedup(source, output=None, **options):
    """Removes near-duplicates; see :func:`neardup.api.dedup`."""
    from .api import dedup as _dedup
    return _dedup(source, output, **options)


__all__ = ["dedup", "Config", "MinHasher", "NeardupError", "ConfigError", "InputError",
           "candidate_probability", "midpoint", "false_positive_area", "false_negative_area", "choose_params"]
