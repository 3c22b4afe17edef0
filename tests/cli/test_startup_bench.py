"""bench/startup.py's check of a source tree's bytecode: a module whose ``__pycache__`` does not
match its source is compiled again at every start under ``PYTHONDONTWRITEBYTECODE=1`` (a cost an
installed neardup never pays), and the bench names it."""

from __future__ import annotations

import importlib.util
import os
import py_compile
import sys

from helpers import ROOT

sys.path.insert(0, str(ROOT / "bench"))
import startup as bench_startup  # noqa: E402  (bench/startup.py)


def _tree(tmp_path):
    package = tmp_path / "neardup"
    package.mkdir()
    modules = {name: package / f"{name}.py" for name in ("__init__", "a", "b")}
    for name, path in modules.items():
        path.write_text(f"X = {name!r}\n")
        py_compile.compile(str(path), doraise=True)
    return modules


def test_current_bytecode_is_not_stale(tmp_path):
    _tree(tmp_path)
    assert bench_startup.stale_bytecode(str(tmp_path)) == []


def test_a_changed_or_uncompiled_module_is_stale(tmp_path):
    modules = _tree(tmp_path)
    st = modules["a"].stat()
    modules["a"].write_text("X = 'changed'\n")  # another size, the same second
    os.utime(modules["a"], ns=(st.st_atime_ns, st.st_mtime_ns))
    os.utime(modules["b"], ns=(st.st_atime_ns, st.st_mtime_ns + 5 * 10**9))  # the same size, a later mtime
    os.remove(importlib.util.cache_from_source(str(modules["__init__"])))
    assert bench_startup.stale_bytecode(str(tmp_path)) == [os.path.join("neardup", f"{n}.py")
                                                            for n in ("__init__", "a", "b")]


def test_hash_based_bytecode_is_taken_as_current(tmp_path):
    modules = _tree(tmp_path)
    py_compile.compile(str(modules["a"]), doraise=True, invalidation_mode=py_compile.PycInvalidationMode.CHECKED_HASH)
    assert bench_startup.stale_bytecode(str(tmp_path)) == []
