"""The one loader of the compiled loops that read and copy files (neardup.io.compiled): nothing
imported before the first call, the kernel loaded by one call that does nothing, the answer kept;
None where the C library lacks what the kernel calls or loading it fails."""

from __future__ import annotations

import pytest

import sys

import neardup.kernels
from neardup.io import compiled, kernel_copy
from neardup.io.compiled import compiled_loop
from neardup.io.formats import text as text_format


def _fake_kernel(monkeypatch, available=True, fails=False):
    """``neardup.kernels.filecopy.copy_files`` replaced by a function that records its calls,
    ``files_available`` saying ``available``."""
    from neardup.kernels import filecopy

    calls = []

    def loop(*args):
        calls.append(args)
        if fails:
            raise RuntimeError("the linker")
        return len(args)

    monkeypatch.setattr(filecopy, "copy_files", loop)
    monkeypatch.setattr(filecopy, "files_available", lambda: available)
    return loop, calls


def test_the_kernel_is_loaded_on_the_first_call_by_one_warm_call_and_kept(monkeypatch):
    loaded = compiled_loop("filecopy", "copy_files", "files_available", 1, [0])
    loop, calls = _fake_kernel(monkeypatch)
    assert calls == []  # nothing loaded before the first call
    assert loaded() is loop
    assert calls == [(1, [0])]  # the warm call, with the arguments given
    assert loaded() is loop and loaded() is loop
    assert calls == [(1, [0])]  # once


@pytest.mark.parametrize("available, fails", [(False, False), (True, True)])
def test_no_kernel_where_the_c_library_lacks_it_or_loading_fails(monkeypatch, available, fails):
    loaded = compiled_loop("filecopy", "copy_files", "files_available", 7)
    _, calls = _fake_kernel(monkeypatch, available=available, fails=fails)
    assert loaded() is None
    assert calls == ([] if not available else [(7,)])  # never called where the C library lacks it
    assert loaded() is None and len(calls) == (0 if not available else 1)  # the answer kept


def test_the_three_loops_are_the_kernels_of_their_modules_where_they_run():
    from neardup.kernels import filecopy, fileread

    for loaded, kernels, name, available in [
            (kernel_copy._compiled_loop, filecopy, "copy_file_ranges", "available"),
            (text_format._compiled_copier, filecopy, "copy_files", "files_available"),
            (text_format._compiled_reader, fileread, "read_files", "reading_available")]:
        assert loaded() is (getattr(kernels, name) if getattr(kernels, available)() else None)


@pytest.mark.parametrize("module, other", [("filecopy", "fileread"), ("fileread", None)])
def test_a_loop_imports_its_own_module_alone(monkeypatch, module, other):
    # both kernel modules were imported whatever loop was loaded (a JSONL run imported fileread)
    for name in ("filecopy", "fileread"):
        monkeypatch.delitem(sys.modules, f"neardup.kernels.{name}", raising=False)
        monkeypatch.delattr(neardup.kernels, name, raising=False)
    loops = compiled.kernels(module)
    assert loops is sys.modules[f"neardup.kernels.{module}"]
    if other is not None:
        assert f"neardup.kernels.{other}" not in sys.modules


def test_a_loop_of_an_unknown_module_is_refused_not_left_to_python():
    # guards: compiled_loop importing its module outside the try that turns a failure into None
    # (a misspelt module would have made every call the slow Python loop, silently)
    loaded = compiled_loop("filecopies", "copy_files", "files_available")
    with pytest.raises(ValueError, match="'filecopies'"):
        loaded()
