"""The hash version of a run: recorded in stats.json, part of the run's identity (``--resume``
with another version is refused in one line), and kept by an index (refused in one line that says
how to rebuild it when a run's version differs or the index has none)."""

from __future__ import annotations

import hashlib
import json

import pytest

from neardup import Config
from neardup.errors import ConfigError, StorageError
from neardup.index import Index

from helpers import ROOT, run_cli

EXAMPLE = ROOT / "examples" / "corpus.jsonl"
TEXTS = ["the quick brown fox jumps over the lazy dog and runs far away", "another document of a few words here",
         "the quick brown fox jumps over the lazy dog and runs far away!"]


def one_error_line(capsys) -> str:
    err = capsys.readouterr().err
    lines = [x for x in err.splitlines() if x.strip()]
    assert len(lines) == 1 and lines[0].startswith("neardup: error: ") and "Traceback" not in err, err
    return lines[0]


def test_stats_record_the_hash_version_and_resume_refuses_another(tmp_path, capsys):
    out, work = tmp_path / "out", tmp_path / "work"
    assert run_cli("dedup", EXAMPLE, "-o", out, "--work-dir", work, "-q") == 0
    assert json.loads((out / "stats.json").read_text())["params"]["hash_version"] == 2
    state = json.loads((work / "state.json").read_text())
    assert state["identity"]["config"]["hash_version"] == 2
    state["done"] = {"read": state["done"]["read"]}  # stopped after the read stage
    (work / "state.json").write_text(json.dumps(state))
    assert run_cli("dedup", EXAMPLE, "-o", tmp_path / "out2", "--work-dir", work, "-q", "--resume",
                   "--hash-version", "1") == 2
    line = one_error_line(capsys)
    assert "cannot resume" in line and "hash_version" in line
    out1 = tmp_path / "out1"
    assert run_cli("dedup", EXAMPLE, "-o", out1, "-q", "--hash-version", "1") == 0
    assert json.loads((out1 / "stats.json").read_text())["params"]["hash_version"] == 1


def test_an_index_keeps_its_hash_version_and_never_mixes(tmp_path, capsys):
    path = str(tmp_path / "v1.ndx")
    Index(path, hash_version=1).add(TEXTS, ids=["a", "b", "c"])
    assert Index(path).params["hash_version"] == 1
    assert Index(path).config.hash_version == 1          # not given: the index's own
    with pytest.raises(ConfigError) as e:
        Index(path, Config())                             # a whole Config: version 2
    msg = str(e.value)
    assert "\n" not in msg and "hash version 1, this run with 2" in msg and "neardup index add" in msg
    with pytest.raises(ConfigError, match="hash version 1, this run with 2"):
        Index(path, hash_version=2)
    # the command line: one line, nothing added
    assert run_cli("index", "add", path, EXAMPLE, "--hash-version", "2") == 2
    line = one_error_line(capsys)
    assert "hash version 1" in line and "neardup index add" in line
    assert Index(path).stats()["documents"] == 3


def test_an_index_without_a_hash_version_is_refused(tmp_path, capsys):
    path = tmp_path / "old.ndx"
    Index(str(path)).add(TEXTS, ids=["a", "b", "c"])
    outer = json.loads((path / "manifest.json").read_text())
    del outer["manifest"]["params"]["hash_version"]       # as an index made before versions
    outer["sha256"] = hashlib.sha256(json.dumps(outer["manifest"], sort_keys=True).encode()).hexdigest()
    (path / "manifest.json").write_text(json.dumps(outer))
    with pytest.raises(StorageError) as e:
        Index(str(path))
    msg = str(e.value)
    assert "\n" not in msg and "no hash_version" in msg and "neardup index add" in msg
    assert run_cli("index", "add", path, EXAMPLE) == 2
    assert "no hash_version" in one_error_line(capsys)
