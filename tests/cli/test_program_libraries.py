"""The ``neardup`` program has the largest shared libraries of its start (llvmlite's LLVM,
pyarrow's extension and the Arrow libraries it links) loaded by a thread while its main thread
imports numba: the files found as their packages' imports find them, none of their Python run
there, and the imports afterwards work on the libraries loaded."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

from helpers import SRC, child_env

linux_only = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self/maps")


def _python(code: str, cwd=None) -> dict:
    env = dict(child_env(), PYTHONPATH=SRC + os.pathsep + os.environ.get("PYTHONPATH", ""))
    r = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env=env, capture_output=True, text=True,
                       timeout=300, cwd=cwd)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout.strip().splitlines()[-1])


@linux_only
def test_the_libraries_are_loaded_without_their_packages_and_then_imported():
    """Mutations: a wrong file name in AHEAD_LIBRARIES -> a path missing; a package imported to
    find it -> its module in sys.modules before the import."""
    got = _python("""
        import json, os, sys
        from neardup.cli import AHEAD_LIBRARIES, _library_paths, _load_libraries
        paths = _library_paths()
        _load_libraries()
        mapped = {line.split()[-1] for line in open("/proc/self/maps") if line.rstrip().endswith(".so")}
        before = [p for p in ("llvmlite", "pyarrow") if p in sys.modules]
        import llvmlite.binding, pyarrow
        print(json.dumps({"wanted": len(AHEAD_LIBRARIES), "paths": paths, "loaded": [os.path.realpath(p) in mapped for p in paths],
                          "imported_before": before, "arrow": pyarrow.array([1, 2]).to_pylist(),
                          "llvm": ".".join(map(str, llvmlite.binding.llvm_version_info))}))
    """)
    assert len(got["paths"]) == got["wanted"] == 2, got
    assert got["loaded"] == [True, True]
    assert got["imported_before"] == []
    assert got["arrow"] == [1, 2] and got["llvm"]


def test_the_program_loads_them_in_a_daemon_thread_of_its_start(tmp_path):
    """Mutation: no call in main() -> no thread."""
    (tmp_path / "c.jsonl").write_text('{"text": "one document"}\n')
    got = _python(f"""
        import json, os, sys, threading
        import neardup.cli as cli
        seen = []
        real = cli._load_libraries
        def spy():
            t = threading.current_thread()
            seen.append([t.name, t.daemon, t is threading.main_thread(), "numba" in sys.modules])
            real()
        cli._load_libraries = spy
        _exit = os._exit
        def at_exit(code):
            print(json.dumps(seen), flush=True)
            _exit(code)
        os._exit = at_exit
        sys.argv = ["neardup", "dedup", {str(tmp_path / "c.jsonl")!r}, "--output", {str(tmp_path / "out")!r}, "--quiet"]
        cli.main()
    """, cwd=str(tmp_path))
    assert len(got) == 1
    name, daemon, main, _ = got[0]
    assert name == "neardup-libraries" and daemon and not main
