"""The modules of a run's path import no pyarrow.compute (25-31 CPU-ms of a run's start: issue
32); tests/cli/test_startup.py runs whole default runs to check it, this the imports alone."""

from __future__ import annotations

import subprocess
import sys

import pytest

from helpers import child_env

RUN_PATH = ["neardup.cli.dedup", "neardup.api", "neardup.run", "neardup.stages", "neardup.stages.read",
            "neardup.stages.corpus", "neardup.stages.pairs", "neardup.stages.clusters", "neardup.stages.write",
            "neardup.stages.mark", "neardup.stages.preload", "neardup.io.formats.jsonl", "neardup.io.columns",
            "neardup.io.batch", "neardup.io.storage.tables", "neardup.kernels.shingles", "neardup.kernels.hashing",
            "neardup.kernels.jsonl", "neardup.kernels.lines", "neardup.report.html", "neardup.report.output_folder"]


@pytest.mark.slow
def test_the_modules_of_a_run_import_no_pyarrow_compute():
    code = ("import importlib, sys\n"
            f"for m in {RUN_PATH!r}:\n"
            "    importlib.import_module(m)\n"
            "    print(m, 'pyarrow.compute' in sys.modules)\n")
    r = subprocess.run([sys.executable, "-c", code], env=child_env(), capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == [w for m in RUN_PATH for w in (m, "False")], r.stdout


@pytest.mark.slow
def test_a_run_of_more_documents_than_numpy_takes_imports_pyarrow_compute_beside_the_pair_stage(tmp_path):
    """Past NUMPY_UP_TO documents the clusters stage's takes go through Arrow's, which import
    pyarrow.compute: the pair stage's start imports it in a thread of its own (off the clusters
    stage's clock), and the clusters stage takes by Arrow's (the store's arrow_takes set); at or under it,
    and in a Ray driver, nothing is imported and the flag is not set."""
    import json
    lines = [json.dumps({"id": f"d{i}", "text": f"doc {i % 40} " + "shared words of a near duplicate " * 3})
             for i in range(200)]
    (tmp_path / "c.jsonl").write_text("\n".join(lines) + "\n")
    code = f"""
import sys, threading
importers = []
class Finder:
    @staticmethod
    def find_spec(name, path=None, target=None):
        if name == "pyarrow.compute":
            importers.append(threading.current_thread().name)
sys.meta_path.insert(0, Finder)
import neardup.kernels.arrays as arrays
from neardup.stages.clusters import compute_ahead
class Engine:
    in_process = True
class Store:
    arrow_takes = False
small, driver = Store(), Store()
print(compute_ahead(Engine(), arrays.NUMPY_UP_TO, small), "pyarrow.compute" in sys.modules, small.arrow_takes)
Engine.in_process = False
print(compute_ahead(Engine(), arrays.NUMPY_UP_TO + 1, driver), "pyarrow.compute" in sys.modules, driver.arrow_takes)
arrays.NUMPY_UP_TO = 50
from neardup.stages.clusters import ClustersStage
flags, whole = [], ClustersStage.whole
ClustersStage.whole = lambda self, run: flags.append(run.store.arrow_takes) or whole(self, run)
from neardup.cli import main
print(main(["dedup", {str(tmp_path / "c.jsonl")!r}, "--output", {str(tmp_path / "out")!r}, "--quiet"]))
print(importers, flags)
"""
    r = subprocess.run([sys.executable, "-c", code], env=child_env(), capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == ["None False False", "None False False", "0", "['neardup-arrow-compute'] [True]"], \
        r.stdout + r.stderr
