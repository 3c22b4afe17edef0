"""The UTF-8 byte order mark is defined once: the standard library's ``codecs.BOM_UTF8``,
imported wherever a file's first bytes are looked at (what is a URL is decided once too:
tests/io/test_io_seam.py)."""

from __future__ import annotations

from pathlib import Path

from helpers import SRC


def test_no_module_spells_the_byte_order_mark():
    spelled = [str(p.relative_to(SRC)) for p in Path(SRC).rglob("*.py")
               if any(s in p.read_text(encoding="utf-8") for s in ("\\xef\\xbb\\xbf", "\\xEF\\xBB\\xBF"))]
    assert spelled == []

