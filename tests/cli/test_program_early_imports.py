"""What the ``neardup`` program imports before it parses its command line
(:func:`neardup.cli.early_imports`): numba for a command that runs kernels in this process, numpy
alone for one that runs none (``params``, ``report``, a Ray driver), nothing for a request for
help or the version (`neardup --version` imported numba, 0.3 s, to print one line)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

from helpers import child_env
from neardup.cli import early_imports


@pytest.mark.parametrize("argv, wanted", [
    (["dedup", "corpus.jsonl", "-o", "out"], "numba"),
    (["signatures", "corpus.jsonl", "-o", "sigs"], "numba"),
    (["audit", "corpus.jsonl"], "numba"),
    (["index", "add", "ix", "corpus.jsonl"], "numba"),
    (["dedup", "corpus.jsonl", "-o", "out", "--engine", "ray"], "numpy"),
    (["dedup", "corpus.jsonl", "-o", "out", "--engine=ray"], "numpy"),
    (["params", "--threshold", "0.8"], "numpy"),
    (["report", "out"], "numpy"),
    (["--version"], None),
    (["-h"], None),
    (["--help"], None),
    (["dedup", "--help"], None),
    (["dedup", "corpus.jsonl", "-h"], None),
    (["index", "add", "--help"], None),
    (["params", "--help"], None),
    ([], None),
    (["dedpu", "corpus.jsonl"], None),          # a typo: the parser says so, nothing is run
    (["corpus.jsonl"], None),
    # after "--" every word is an input, a file named --help among them
    (["dedup", "-o", "out", "--", "--help"], "numba"),
])
def test_what_the_program_imports_before_it_parses(argv, wanted):
    assert early_imports(argv) == wanted


PROBE = textwrap.dedent("""
    import atexit, json, os, sys
    sys.argv = ["neardup"] + sys.argv[1:]
    seen = {}
    import neardup.cli as cli
    parse = cli.build_parser
    def probe(argv=None):  # the program's imports before its parser is made
        seen.update(numba="numba" in sys.modules, numpy="numpy" in sys.modules)
        return parse(argv)
    cli.build_parser = probe
    def done():
        seen["numpy_at_exit"] = "numpy" in sys.modules
        os.write(2, ("PROBE " + json.dumps(seen) + "\\n").encode())
    atexit.register(done)
    cli.main()
""")


def _program(tmp_path, *args):
    r = subprocess.run([sys.executable, "-c", PROBE, *args], env=child_env(), capture_output=True, text=True,
                       timeout=180, cwd=tmp_path)
    line = [x for x in r.stderr.splitlines() if x.startswith("PROBE ")]
    assert line, r.stderr
    return r, json.loads(line[-1][len("PROBE "):])


@pytest.mark.slow
def test_the_program_imports_numba_first_for_a_dedup_numpy_alone_for_params_nothing_for_its_help(tmp_path):
    (tmp_path / "c.jsonl").write_text("".join(json.dumps({"text": f"document number {i} of a few words"}) + "\n"
                                              for i in range(20)))
    r, seen = _program(tmp_path, "dedup", "c.jsonl", "-o", "out", "--quiet")
    assert r.returncode == 0, r.stderr
    assert seen == {"numba": True, "numpy": True, "numpy_at_exit": True}
    r, seen = _program(tmp_path, "params", "--threshold", "0.8")
    assert r.returncode == 0, r.stderr
    assert seen == {"numba": False, "numpy": True, "numpy_at_exit": True} and "18 bands x 7 rows" in r.stdout
    # the help and the version: not even numpy, though every option is declared for the help
    r, seen = _program(tmp_path, "--version")
    assert r.returncode == 0, r.stderr
    assert seen == {"numba": False, "numpy": False, "numpy_at_exit": False} and r.stdout.startswith("neardup ")
    r, seen = _program(tmp_path, "dedup", "--help")
    assert r.returncode == 0, r.stderr
    assert seen == {"numba": False, "numpy": False, "numpy_at_exit": False} and "--threshold" in r.stdout
