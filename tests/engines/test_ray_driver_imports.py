"""What a Ray run's driver does not import. It runs no kernel, so it does not import numba (0.3-0.5 CPU-s of its start,
0.19 s of it for the report's character classes): the library's modules import the kernels'
modules (each of which imports numba) in the functions that call a kernel, and the ``neardup``
program imports numpy alone for ``--engine ray`` (:func:`neardup.cli.on_ray`). And the program's
driver makes Ray's serialization context with pydantic hidden (:class:`~neardup.engines.ray_cluster.pydantic_hidden`):
no pydantic imported on the start's critical path."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from helpers import child_env

# what a Ray driver imports and calls that is not a kernel: every stage, the formats, the engine,
# the report's word diff, the read stage's release of its buffers
DRIVER = """
import json, sys
import neardup.api, neardup.engines.ray, neardup.report.html
import neardup.stages.against, neardup.stages.clusters, neardup.stages.corpus, neardup.stages.pairs
import neardup.stages.read, neardup.stages.write
import neardup.io.formats.csv, neardup.io.formats.jsonl, neardup.io.formats.jsonl_kept
import neardup.io.formats.jsonl_ranges, neardup.io.kept_rows, neardup.io.splits, neardup.io.storage.ranges
from neardup.report.diff import word_diff_html
from neardup.stages.read import release_scratches
word_diff_html("one two three", "one two four")
release_scratches()
before = "numba" in sys.modules
%s
print(json.dumps([before, "numba" in sys.modules]))
"""


def _driver(then: str = "") -> list:
    r = subprocess.run([sys.executable, "-c", DRIVER % then], env=child_env(), capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def test_the_driver_side_of_the_library_imports_no_numba():
    assert _driver() == [False, False]


@pytest.mark.slow
def test_the_probe_sees_numba_once_a_kernel_module_is_imported():
    assert _driver("import neardup.kernels.bands") == [False, True]


@pytest.mark.parametrize("argv, ray", [
    ("dedup in.jsonl -o out --engine ray", True),
    ("dedup --engine=ray in.jsonl -o out", True),
    ("dedup in.jsonl -o out", False),
    ("dedup in.jsonl -o out --engine local", False),
    ("dedup ray -o out --engine=local", False),
    ("dedup in.jsonl -o out --engine ray --engine local", False),  # the last one given
    ("dedup in.jsonl -o out --engine=local --engine ray", True),
    ("dedup -o out -- --engine ray", False),  # inputs named --engine and ray
    ("dedup -o out --engine local -- --engine=ray", False),
    ("dedup -o out --engine ray -- --engine=local", True),
])
def test_the_program_knows_a_ray_run_from_its_command_line_as_the_parser_does(argv, ray):
    """:func:`neardup.cli.on_ray`, read without the parser, says what the parser's parse says."""
    from neardup.cli import build_parser, on_ray
    words = argv.split()
    assert (build_parser(words).parse_args(words).engine == "ray") is ray
    assert on_ray(words) is ray


def _pairs_corpus(path):
    """200 records in 100 pairs of equal texts."""
    with open(path, "w") as f:
        for i in range(200):
            f.write(json.dumps({"id": str(i), "text": f"document {i // 2} " + "some shared words " * 5}) + "\n")
    return path


@pytest.mark.slow
@pytest.mark.ray
def test_a_ray_run_of_the_program_leaves_its_driver_without_numba_or_pydantic(tmp_path):
    pytest.importorskip("ray")
    src = _pairs_corpus(tmp_path / "in.jsonl")
    program = ("import atexit, sys\n"
               "atexit.register(lambda: print('NUMBA', 'numba' in sys.modules, 'PYDANTIC', 'pydantic' in sys.modules))\n"
               "from neardup.cli import main\n"
               "main()\n")
    r = subprocess.run([sys.executable, "-c", program, "dedup", str(src), "-o", str(tmp_path / "out"), "--quiet",
                        "--engine", "ray", "--workers", "2"], env=child_env(), capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0, r.stderr
    assert "NUMBA False PYDANTIC False" in r.stdout.splitlines()
    assert (tmp_path / "out" / "removed.parquet").exists()


def test_pydantic_is_hidden_in_the_program_only_and_importable_again_after(monkeypatch):
    from neardup.engines.ray_cluster import pydantic_hidden
    for name in ("pydantic", "ray._common.pydantic_compat"):
        monkeypatch.delitem(sys.modules, name, raising=False)
    with pydantic_hidden(program=True):
        with pytest.raises(ImportError):
            import pydantic  # noqa: F401
    assert "pydantic" not in sys.modules  # importable again
    with pydantic_hidden(program=False):
        assert "pydantic" not in sys.modules  # a library caller's process: left alone
    monkeypatch.setitem(sys.modules, "pydantic", object())
    with pydantic_hidden(program=True):  # imported already: left as it is
        assert sys.modules["pydantic"] is not None


def test_ray_data_imports_after_the_driver_started_ray_with_pydantic_hidden():
    """The program's driver makes Ray's pydantic_compat without pydantic; Ray Data, imported later
    by a run that shuffles (several nodes, NEARDUP_RAY_ONE_CALL=0), imports ray.util.state, whose
    pydantic dataclass then failed on an assertion (a traceback, exit 1) when its DataContext was made."""
    pytest.importorskip("ray")
    program = ("from neardup.engines.ray_cluster import import_ray_data, pydantic_hidden\n"
               "with pydantic_hidden(program=True):\n"
               "    import ray._common.pydantic_compat\n"
               "import_ray_data()\n"
               "from ray.data.context import DataContext\n"
               "DataContext.get_current()\n"
               "print('made')\n")
    r = subprocess.run([sys.executable, "-c", program], env=child_env(), capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-3000:]
    assert r.stdout.split() == ["made"]


@pytest.mark.slow
@pytest.mark.ray
def test_a_shuffled_ray_run_of_the_program_succeeds(tmp_path):
    """The program's run whose steps are shuffled by Ray Data (as on a cluster of several nodes)."""
    pytest.importorskip("ray")
    src = _pairs_corpus(tmp_path / "in.jsonl")
    r = subprocess.run([sys.executable, "-m", "neardup", "dedup", str(src), "-o", str(tmp_path / "out"), "--quiet",
                        "--engine", "ray", "--workers", "2"], env=child_env(dict(os.environ, NEARDUP_RAY_ONE_CALL="0")),
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    assert (tmp_path / "out" / "stats.json").exists()
