"""The walls of the index's room, read from the source: ``neardup index`` (the CLI module) asks
the public API alone, and only :class:`neardup.index.Index` touches what is private to it."""

from __future__ import annotations

import ast
import importlib.util
from pathlib import Path

import pytest

import neardup

SRC = Path(neardup.__file__).parent
# what a CLI module may import from neardup, besides its siblings in neardup.cli
PUBLIC = {"neardup", "neardup.api", "neardup.config", "neardup.errors"}


def imported_modules(path: Path, package: str):
    """(line, module) of every import in a module, at any depth (imports inside functions too),
    relative ones resolved; ``from PACKAGE import NAME`` counts as NAME's module when NAME is one."""
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                base = f"{parent}.{base}" if base else parent
            for alias in node.names:
                sub = f"{base}.{alias.name}"
                yield node.lineno, sub if _is_module(sub) else base


def _is_module(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False


def test_the_index_cli_imports_nothing_of_neardup_but_the_public_api():
    found = list(imported_modules(SRC / "cli" / "index.py", "neardup.cli"))
    assert any(m == "neardup.api" for _, m in found)  # the walk sees the imports inside functions
    private = [f"line {line}: {module}" for line, module in found
               if module.split(".")[0] == "neardup" and module not in PUBLIC
               and not module.startswith("neardup.cli.")]
    assert private == [], "neardup.cli.index imports only neardup, neardup.api, neardup.config, neardup.errors"


def test_the_import_walk_sees_a_private_import(tmp_path):
    """The rule's own check: a module of io imported as a name of the package is caught."""
    module = tmp_path / "m.py"
    module.write_text("def f():\n    from .. import io as nio\n    from ..api import plural\n")
    assert [m for _, m in imported_modules(module, "neardup.cli")] == ["neardup.io", "neardup.api"]


@pytest.mark.slow
def test_nothing_outside_the_index_class_touches_its_privates():
    """An Index's state (the manifest last read, its open segments) is its own: the writer, the
    removal, the compaction and the Bloom lookup use its public methods (forget_manifest,
    committed_segments, empty_manifest)."""
    names = {"index", "idx", "ix"}
    found = []
    for path in sorted(SRC.rglob("*.py")):
        if path == SRC / "index" / "core.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not (isinstance(node, ast.Attribute) and node.attr.startswith("_") and not node.attr.startswith("__")):
                continue
            owner = node.value
            if (isinstance(owner, ast.Name) and owner.id in names) or \
                    (isinstance(owner, ast.Attribute) and owner.attr in names):
                found.append(f"{path.relative_to(SRC)}:{node.lineno}: .{node.attr}")
    assert found == []


def test_no_module_of_the_index_is_over_700_lines():
    long = {p.name: n for p in (SRC / "index").glob("*.py") if (n := len(p.read_text().splitlines())) > 700}
    assert long == {}
