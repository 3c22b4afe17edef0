"""The command line calls the public API, nothing more: no module of ``neardup.cli`` imports
anything of neardup but the package itself, ``neardup.api``, ``neardup.config``,
``neardup.errors`` and its own sibling modules."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

import neardup

PUBLIC = {"neardup", "neardup.api", "neardup.config", "neardup.errors"}
CLI = Path(neardup.__file__).parent / "cli"


def _imports(path: Path):
    """(line, module, name) of every import of neardup in a cli module, resolved to absolute names."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = ["neardup", "cli"][:3 - node.level]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            if module.split(".")[0] == "neardup":
                for alias in node.names:
                    yield node.lineno, module, alias.name
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == "neardup":
                    yield node.lineno, alias.name, None


def _is_module(name: str) -> bool:
    try:
        importlib.import_module(name)
        return True
    except ImportError:
        return False


def _fresh_python(code: str) -> list:
    """What ``code`` prints, run in a fresh Python on this checkout's sources, in words."""
    import os
    import subprocess
    import sys

    from helpers import SRC
    env = dict(os.environ, PYTHONPATH=SRC + os.pathsep + os.environ.get("PYTHONPATH", ""))
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    return r.stdout.split()


def test_cli_imports_only_the_public_api():
    wrong = []
    for path in sorted(CLI.glob("*.py")):
        for line, module, name in _imports(path):
            target = module
            if name is not None and _is_module(f"{module}.{name}"):
                target = f"{module}.{name}"  # `from .. import io` imports the module io
            if target in PUBLIC or target.startswith("neardup.cli"):
                continue
            wrong.append(f"{path.name}:{line}: {target}" + (f" ({name})" if name and target == module else ""))
    assert wrong == [], "the command line may use only the public API:\n" + "\n".join(wrong)


def test_the_check_sees_a_private_import(tmp_path, monkeypatch):
    """The rule above can fail: a cli module that imports an internal module is caught."""
    bad = tmp_path / "cli"
    bad.mkdir()
    (bad / "x.py").write_text("from ..io.storage import fs\nfrom ..api import dedup\nfrom .. import io\n")
    found = [(module, name) for _, module, name in _imports(bad / "x.py")]
    assert ("neardup.io.storage", "fs") in found and ("neardup", "io") in found
    assert _is_module("neardup.io") and not _is_module("neardup.dedup")


@pytest.mark.slow
def test_import_neardup_is_light_and_keeps_every_public_name():
    """`import neardup` loads neither numpy nor numba (a report, a Ray driver, a program that
    catches neardup's errors need neither); every name of ``neardup.__all__`` still resolves, to
    the object of the module that defines it."""
    code = ("import sys, neardup\n"
            "light = not ({'numpy', 'numba', 'pyarrow'} & set(sys.modules))\n"
            "from neardup import Config, MinHasher, choose_params, dedup, Index\n"
            "from neardup.config import Config as C\n"
            "from neardup.kernels.minhash import MinHasher as M\n"
            "ok = all(hasattr(neardup, n) for n in neardup.__all__) and set(neardup.__all__) <= set(dir(neardup))\n"
            "print(light, ok, Config is C and MinHasher is M and neardup.Config is C)\n")
    assert _fresh_python(code) == ["True", "True", "True"]
    assert not hasattr(neardup, "no_such_name")


@pytest.mark.slow
def test_neardup_api_imports_the_index_on_first_use():
    """``import neardup.api`` (the command line's import) leaves the index's modules out (15-25 ms
    of a dedup's start-up: a run without --against opens no index); its index names still
    resolve, to the objects of the modules that define them, and take part in ``import *``."""
    code = ("import sys, neardup.api as api\n"
            "light = not any(m.startswith('neardup.index') for m in sys.modules)\n"
            "from neardup.api import add_files\n"
            "import neardup.index, neardup.index.commands as c\n"
            "same = api.Index is neardup.index.Index and add_files is c.add_files and api.QueryAnswers is c.QueryAnswers\n"
            "names = {}\n"
            "exec('from neardup.api import *', names)\n"
            "print(light, same, set(api.__all__) <= set(names))\n")
    assert _fresh_python(code) == ["True", "True", "True"]
    import neardup.api
    with pytest.raises(AttributeError, match="no_such_name"):
        neardup.api.no_such_name


def test_a_command_line_makes_the_parser_of_its_command_alone_and_parses_the_same():
    """``neardup dedup ...`` makes the dedup parser alone (the other commands' parsers and modules
    are 2.5 ms of a run's start), and its parse is the one the parser of every command gives; a
    line that names no command (``--help``, a typo) gets every command's parser."""
    import argparse

    from neardup.cli import COMMANDS, build_parser

    def commands(parser):
        return list(next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices)

    line = ["dedup", "in.jsonl", "-o", "out", "--threshold", "0.7", "--quiet"]
    assert commands(build_parser(line)) == ["dedup"]
    assert vars(build_parser(line).parse_args(line)) == vars(build_parser().parse_args(line))
    line = ["index", "query", "idx", "in.jsonl"]
    assert commands(build_parser(line)) == ["index"]
    assert vars(build_parser(line).parse_args(line)) == vars(build_parser().parse_args(line))
    for other in (None, [], ["--help"], ["dedupe", "in.jsonl"]):
        assert commands(build_parser(other)) == list(COMMANDS)
    code = ("import sys\nfrom neardup.cli import build_parser\n"
            "build_parser(['dedup', 'in.jsonl', '-o', 'out']).parse_args(['dedup', 'in.jsonl', '-o', 'out'])\n"
            "print('neardup.cli.index' in sys.modules, 'neardup.cli.audit' in sys.modules)\n")
    assert _fresh_python(code) == ["False", "False"]
