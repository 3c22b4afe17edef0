"""Progress bars on stderr (tqdm), silenced by ``quiet``."""

from __future__ import annotations

import sys


class _Null:
    def update(self, n=1):
        pass

    def set_postfix_str(self, s, refresh=True):
        pass

    def close(self):
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def bar(desc: str, total=None, unit: str = "doc", quiet: bool = False):
    if quiet:
        return _Null()
    from tqdm.auto import tqdm
    return tqdm(total=total, desc=desc, unit=unit, unit_scale=True, file=sys.stderr, dynamic_ncols=True,
                leave=True, mininterval=0.5)
