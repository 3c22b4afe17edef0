"""Fixtures of the io tests."""

from __future__ import annotations

import pytest


@pytest.fixture
def cwd(tmp_path, monkeypatch):
    """Work inside tmp_path, so that source names are short relative paths."""
    monkeypatch.chdir(tmp_path)
    return tmp_path
