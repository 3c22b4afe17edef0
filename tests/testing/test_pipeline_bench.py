"""bench/pipeline.py starts every timed process from current bytecode (:func:`compile_bytecode`),
as an install leaves it: under ``PYTHONDONTWRITEBYTECODE=1`` a tree with stale ``__pycache__``
compiles those modules again at every start, a cost the peers and a pip-installed neardup never
pay."""

import os
import sys

from helpers import ROOT

sys.path.insert(0, str(ROOT / "bench"))
import pipeline  # noqa: E402  (bench/pipeline.py)
import startup as bench_startup  # noqa: E402  (bench/startup.py)


def test_the_neardup_that_python_m_resolves_gets_current_bytecode(tmp_path):
    package = tmp_path / "neardup"
    (package / "sub").mkdir(parents=True)
    for path in (package / "__init__.py", package / "a.py", package / "sub" / "__init__.py", package / "sub" / "b.py"):
        path.write_text("X = 1\n")
    assert len(bench_startup.stale_bytecode(str(tmp_path))) == 4
    env = dict(os.environ, PYTHONPATH=str(tmp_path), PYTHONDONTWRITEBYTECODE="1")
    pipeline.compile_bytecode(env=env)
    assert bench_startup.stale_bytecode(str(tmp_path)) == []


def test_a_run_that_read_its_input_from_storage_is_flagged():
    """bench/common.run_measured records what the command read from storage (wait4's ru_inblock),
    and disk_read_note flags a run that read more than 1% of its input from there: a time taken
    with the input out of the page cache is a disk's, not the page cache's."""
    import common

    m = common.run_measured([sys.executable, "-c", "pass"])
    assert m["returncode"] == 0 and isinstance(m["disk_read_bytes"], int) and m["disk_read_bytes"] >= 0
    assert isinstance(m["major_faults"], int)
    assert common.disk_read_note([{"disk_read_bytes": 0}, {"disk_read_bytes": 10_000}], 10**6) is None
    note = common.disk_read_note([{"disk_read_bytes": 0}, {"disk_read_bytes": 20_000}], 10**6)
    assert note is not None and "2% of its" in note
    assert common.disk_read_note([{"disk_read_bytes": None}], 10**6) is None
