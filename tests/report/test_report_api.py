"""`neardup report`, `neardup audit` and `neardup params` through the public API
(neardup.api.report / audit / params): the command line only parses, calls and prints, and its
modules import nothing of neardup but the public API."""

from __future__ import annotations

import argparse
import ast
import importlib.util
import inspect
import json
from pathlib import Path

import pytest

import neardup
from neardup import api
from neardup.errors import ConfigError

from helpers import write_jsonl
from test_report import make_output

PUBLIC = {"neardup", "neardup.api", "neardup.config", "neardup.errors"}
CLI = Path(neardup.__file__).parent / "cli"


def imported_modules(path: Path):
    """(line, module) of every neardup module a file of neardup.cli imports, at the top or inside
    a function; ``from .. import api`` counts as neardup.api."""
    package = ["neardup", "cli"]
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = ".".join(package[:len(package) - node.level + 1] + ([node.module] if node.module else []))
            else:
                base = node.module
            yield node.lineno, base
            for alias in node.names:  # a name that is a module of its own: that module
                name = f"{base}.{alias.name}"
                if base.startswith("neardup") and importlib.util.find_spec(base) is not None \
                        and _is_module(name):
                    yield node.lineno, name


def _is_module(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except ModuleNotFoundError:
        return False


@pytest.mark.parametrize("command", ["report", "audit", "params"])
def test_cli_modules_import_only_the_public_api(command):
    found = list(imported_modules(CLI / f"{command}.py"))
    assert any(m == "neardup.api" for _, m in found), found  # what it calls
    bad = [(line, m) for line, m in found
           if m.startswith("neardup") and m not in PUBLIC and not m.startswith("neardup.cli.")
           and m != "neardup.cli"]
    assert not bad, f"cli/{command}.py imports more than the public API: {bad}"


def test_the_check_sees_a_private_import(tmp_path):
    path = tmp_path / "x.py"
    path.write_text("from ..api import report\nfrom .formatting import H\n"
                    "def f():\n    from ..report.html import write_report\n    from .. import io\n")
    found = [m for _, m in imported_modules(path)]
    assert "neardup.api" in found and "neardup.cli.formatting" in found
    assert "neardup.report.html" in found and "neardup.io" in found


def parser_defaults(command: str) -> dict:
    from neardup.cli import build_parser
    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    return {a.dest: a.default for a in sub.choices[command]._actions}


def test_the_commands_defaults_are_the_api_defaults():
    from neardup.cli.audit import MAX_BYTES
    audit = inspect.signature(api.audit).parameters
    cli = parser_defaults("audit")
    for name in ("sample", "bins", "max_docs", "max_bytes"):
        assert cli[name] == audit[name].default, name
    assert MAX_BYTES == api.AUDIT_MAX_BYTES
    params = inspect.signature(api.params).parameters
    cli = parser_defaults("params")
    for name in ("threshold", "num_perm", "bands", "rows", "min_recall", "method"):
        assert cli[name] == params[name].default, name


def test_report_writes_the_page_and_says_where(tmp_path):
    out = make_output(tmp_path / "out")
    assert api.report(out, plots="svg") == out / "report.html"
    target = tmp_path / "r.html"
    assert api.report(out, target, plots="svg") == target
    assert target.read_bytes() == (out / "report.html").read_bytes()
    with pytest.raises(ConfigError, match="it exists"):
        api.report(out, target, plots="svg")
    assert api.report(out, target, plots="svg", overwrite=True) == target
    assert api.redact("http://u:secret@h/x") == "http://u:***@h/x"


@pytest.mark.slow
def test_params_is_the_summary_and_writes_its_plot(tmp_path):
    from neardup.report.params_text import format_params, params_summary
    summary = api.params(0.7, 64)
    assert summary == params_summary(0.7, 64)
    assert api.params_text(summary) == format_params(summary)
    assert api.params_text(summary).startswith("neardup params: threshold 0.7, num_perm 64")
    assert api.params(bands=10, rows=5)["bands"] == 10
    with pytest.raises(ConfigError, match="--bands and --rows go together"):
        api.params(bands=10)
    plot = tmp_path / "s.svg"
    api.params(plot=plot)
    assert plot.read_text().rstrip().endswith("</svg>")
    with pytest.raises(ConfigError, match="it exists"):  # before any work
        api.params(plot=plot)
    api.params(plot=plot, overwrite=True)


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    import random
    rng = random.Random(3)
    words = [f"w{i}" for i in range(300)]
    texts = []
    for _ in range(40):
        base = [rng.choice(words) for _ in range(40)]
        texts.append(" ".join(base))
        for _ in range(2):
            edited = list(base)
            edited[rng.randrange(40)] = "changed"
            texts.append(" ".join(edited))
    path = tmp_path_factory.mktemp("audit") / "c.jsonl"
    write_jsonl(path, texts, ids=[f"d{i}" for i in range(len(texts))])
    return path


def test_audit_reads_measures_and_writes_its_files(corpus, tmp_path):
    told = []
    target = tmp_path / "a.json"
    result = api.audit([str(corpus)], sample=200, bins=5, max_docs=100, json_file=target, notify=told.append,
                       threshold=0.7)
    assert told == ["audit: reads the first documents in path order, at most 100 documents and 96M of text "
                    "(--max-docs, --max-bytes change it)",
                    "audit of the first 100 documents (--max-docs 100; the rest is not read)"]
    assert result.documents == 100 and result.threshold == 0.7 and len(result.bins) == 5
    assert json.loads(target.read_text()) == json.loads(result.to_json())
    assert result.to_dict()["pairs"]["left_id"][0].startswith("d")  # the inputs' own ids
    assert result.summary().startswith("neardup audit: 100 documents")
    again = api.audit(corpus, neardup.Config(threshold=0.7), sample=200, bins=5, max_docs=100)  # one path
    assert again.to_dict()["pairs"] == result.to_dict()["pairs"]


def test_audit_checks_its_files_before_any_work(corpus, tmp_path):
    with pytest.raises(ConfigError, match="that is an input of this command"):
        api.audit([str(corpus)], json_file=corpus)
    (tmp_path / "a.json").write_text("old")
    with pytest.raises(ConfigError, match="it exists"):
        api.audit([str(corpus)], json_file=tmp_path / "a.json")
    with pytest.raises(ConfigError, match="the same file"):
        api.audit([str(corpus)], json_file=tmp_path / "x.svg", plot=tmp_path / "x.svg")
    with pytest.raises(ConfigError, match="--max-docs must be at least 1"):
        api.audit([str(corpus)], max_docs=0)
    assert (tmp_path / "a.json").read_text() == "old" and sorted(p.name for p in tmp_path.iterdir()) == ["a.json"]
