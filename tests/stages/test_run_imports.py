"""The modules of a run's path import no pyarrow.compute (25-31 CPU-ms of a run's start: issue
32); tests/cli/test_startup.py runs whole default runs to check it, this the imports alone."""

from __future__ import annotations

import subprocess
import sys

from helpers import child_env

RUN_PATH = ["neardup.cli.dedup", "neardup.api", "neardup.run", "neardup.stages", "neardup.stages.read",
            "neardup.stages.corpus", "neardup.stages.pairs", "neardup.stages.clusters", "neardup.stages.write",
            "neardup.stages.mark", "neardup.stages.preload", "neardup.io.formats.jsonl", "neardup.io.columns",
            "neardup.io.batch", "neardup.io.storage.tables", "neardup.kernels.shingles", "neardup.kernels.hashing",
            "neardup.kernels.jsonl", "neardup.kernels.lines", "neardup.report.html", "neardup.report.output_folder"]


def test_the_modules_of_a_run_import_no_pyarrow_compute():
    code = ("import importlib, sys\n"
            f"for m in {RUN_PATH!r}:\n"
            "    importlib.import_module(m)\n"
            "    print(m, 'pyarrow.compute' in sys.modules)\n")
    r = subprocess.run([sys.executable, "-c", code], env=child_env(), capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == [w for m in RUN_PATH for w in (m, "False")], r.stdout
