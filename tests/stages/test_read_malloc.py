"""The read stage's malloc setting (:func:`neardup.stages.read.tune_malloc`): once per process,
glibc's thresholds raised, a setting the user made with glibc's variables kept."""

import ctypes
import sys

import pytest

from neardup.stages import read


class _Libc:
    def __init__(self):
        self.calls = []

    def mallopt(self, param, value):
        self.calls.append((param, value))
        return 1


@pytest.fixture
def libc(monkeypatch):
    fake = _Libc()
    monkeypatch.setattr(ctypes, "CDLL", lambda name: fake)
    monkeypatch.setattr(read, "_malloc_tuned", False)
    monkeypatch.delenv("MALLOC_TRIM_THRESHOLD_", raising=False)
    monkeypatch.delenv("MALLOC_MMAP_THRESHOLD_", raising=False)
    return fake


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's mallopt")
def test_thresholds_raised_once(libc):
    read.tune_malloc()
    read.tune_malloc()
    assert libc.calls == [(-3, read.MMAP_BYTES), (-1, read.TRIM_BYTES)]


@pytest.mark.parametrize("var", ["MALLOC_TRIM_THRESHOLD_", "MALLOC_MMAP_THRESHOLD_"])
def test_the_users_setting_is_kept(libc, monkeypatch, var):
    monkeypatch.setenv(var, "1000000")
    read.tune_malloc()
    assert libc.calls == []
