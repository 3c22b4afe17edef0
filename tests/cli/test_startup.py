"""Start-up costs: what `import neardup` starts and imports, and the background warm-up."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import NamedTuple

import pytest

from helpers import SRC

pytestmark = pytest.mark.slow  # fresh Pythons timed from import, the background warm-up's compiles


def _python(code: str, *, timeout: float = 120) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=SRC + os.pathsep + os.environ.get("PYTHONPATH", ""))
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env=env, capture_output=True, text=True,
                          timeout=timeout)


def test_in_memory_of_a_path_does_not_import_pandas():
    r = _python("""
        import sys
        from neardup.io.inputs import in_memory
        assert in_memory("some/file.jsonl") == (None, None)
        assert in_memory(["a.jsonl"]) is not None
        print("pandas" in sys.modules)
    """)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "False"


@pytest.mark.parametrize("split", [False, True])
def test_a_whole_dedup_run_does_not_import_pandas(tmp_path, split):
    """pyarrow imports pandas (0.2-0.4 s) on its first list or scalar conversion, Parquet dataset
    read or to_numpy: a run from a JSONL file to its report uses none of them, nor does one whose
    file is read as byte ranges (their rows moved by each range's first line where they are read).
    Nor does it import the index's modules: it opens no index."""
    lines = [json.dumps({"id": i, "text": f"doc {i % 40} " + "shared words of a near duplicate " * 3})
             for i in range(200)]
    (tmp_path / "c.jsonl").write_text("\n".join(lines) + "\n")
    r = _python(f"""
        import os, sys
        if {split!r}:
            os.environ["NEARDUP_SPLIT_BYTES"] = "4096"
        from neardup.cli import main
        code = main(["dedup", {str(tmp_path / "c.jsonl")!r}, "--output", {str(tmp_path / "out")!r}, "--quiet"])
        print(code, "pandas" in sys.modules, any(m.startswith("neardup.index") for m in sys.modules))
    """)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "0 False False", r.stdout + r.stderr
    stats = json.loads((tmp_path / "out" / "stats.json").read_text())
    assert stats["counts"]["removed"] > 0 and (tmp_path / "out" / "report.html").is_file()


def test_signatures_of_a_list_do_not_import_pandas():
    r = _python("""
        import sys
        from neardup import MinHasher
        sig = MinHasher(num_perm=16).signatures(["one two three four five six", None, "a b"])
        print(sig.shape, "pandas" in sys.modules)
    """)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "(3, 16) False"


def test_in_memory_still_takes_a_dataframe_and_a_subclass():
    import pandas as pd
    from neardup.io.inputs import in_memory

    class Frame(pd.DataFrame):  # defined outside pandas: found through its MRO
        pass

    for df in (pd.DataFrame({"text": ["a b", "c d"]}, index=[5, 7]), Frame({"text": ["a b"]})):
        kind, tables = in_memory(df)
        assert kind == "pandas"
        assert tables["<table>"].num_rows == len(df)


def test_warmup_is_opt_in_and_runs_in_the_background():
    code = """
        import json, sys, threading
        import neardup
        started_by_import = any(t.name == "neardup-warmup" for t in threading.enumerate())
        if "{call}" == "yes":
            neardup.warmup()
            neardup.warmup()  # a second call does nothing
        names = [t.name for t in threading.enumerate()]
        neardup.warmup_wait()
        import numba.np.ufunc.parallel as p
        print(json.dumps({{"by_import": started_by_import, "thread": "neardup-warmup" in names,
                           "log": neardup._warmup_log, "threading_layer_started": bool(p._is_initialized)}}))
    """
    for call, want in (("no", False), ("yes", True)):
        r = _python(code.format(call=call))
        assert r.returncode == 0, r.stderr
        out = json.loads(r.stdout)
        assert out["by_import"] is False
        assert out["thread"] is want
        if not want:
            assert out["log"] == []
            continue
        assert [step for step, _, _ in out["log"]] == ["_warm_arrow", "_warm_numba_typing", "_warm_numba_target"]
        assert all(err is None for _, _, err in out["log"]), out["log"]
        # no kernel is loaded ahead: numba's threading layer (GNU OpenMP: not fork-safe) is not started
        assert out["threading_layer_started"] is False


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_fork_right_after_import_is_safe():
    # os.fork waits for the warm-up (the child must not inherit a lock it holds); the child can
    # then run the kernels as a process that never called one could before the warm-up existed.
    r = _python("""
        import os, sys
        import neardup
        from neardup.kernels.minhash import MinHasher
        neardup.warmup()
        pid = os.fork()
        if pid == 0:
            s = MinHasher().signatures(["the quick brown fox jumps over the lazy dog"] * 10)
            os._exit(0 if s.shape == (10, 128) else 3)
        _, status = os.waitpid(pid, 0)
        print(os.waitstatus_to_exitcode(status))
    """)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "0", r.stderr
    assert "Exception ignored" not in r.stderr and "Terminating" not in r.stderr, r.stderr


def test_two_concurrent_first_calls_during_the_warmup():
    r = _python("""
        import threading
        import numpy as np
        import neardup
        from neardup.kernels.minhash import MinHasher
        neardup.warmup()
        texts = [f"document {i} with a few words in it and more words" for i in range(300)]
        out = [None, None]
        def run(i):
            out[i] = MinHasher(seed=3).signatures(texts)
        ts = [threading.Thread(target=run, args=(i,)) for i in range(2)]
        for t in ts: t.start()
        for t in ts: t.join()
        again = MinHasher(seed=3).signatures(texts)
        print(bool(np.array_equal(out[0], again) and np.array_equal(out[1], again)))
    """)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "True"


def test_exit_right_after_import_is_clean():
    r = _python("import neardup; neardup.warmup()")
    assert r.returncode == 0
    assert r.stderr == ""


def test_the_dedup_program_sets_up_numba_without_scipy_and_freezes_its_start_up(tmp_path):
    """The `neardup dedup` program (not main(argv) called in a program) sets up numba before its
    first kernel without numba's BLAS check, which imports scipy.linalg when SciPy is installed,
    and moves its start-up objects out of the collector's sight (gc.freeze). Without SciPy
    installed (the CI's machine) the freeze is still checked. Its kernels loaded from the cache
    (the second run) do not import numba's array functions and ufuncs (numba.np.arraymath,
    numba.np.npyimpl: ~46 ms; the clusters stage's selection kernel named them)."""
    import importlib.util
    has_scipy = importlib.util.find_spec("scipy") is not None
    lines = [json.dumps({"id": i, "text": f"doc {i % 40} " + "shared words of a near duplicate " * 3})
             for i in range(200)]
    (tmp_path / "c.jsonl").write_text("\n".join(lines) + "\n")
    seen = _at_exit(tmp_path, "gc, sys", "['scipy.linalg' in sys.modules, gc.get_freeze_count() > 0, gc.isenabled(), "
                    "sorted(m for m in ('numba.np.arraymath', 'numba.np.npyimpl') if m in sys.modules)]")
    for _ in range(2):  # the first may compile the kernels (which imports them all)
        _dedup_program(tmp_path, seen)
    scipy_loaded, frozen, enabled, array_modules = json.loads(seen.path.read_text())
    assert frozen and enabled
    assert not scipy_loaded or not has_scipy
    assert array_modules == []
    assert json.loads((tmp_path / "out" / "stats.json").read_text())["counts"]["removed"] > 0


def test_lazy_names_resolve_once_and_refuse_unknown_names():
    """neardup's and neardup.api's module ``__getattr__`` (neardup._lazy): a listed name is
    imported on first use and kept in the module's globals; any other name is the usual
    AttributeError, naming the module."""
    from neardup._lazy import lazy_names

    space = {"__name__": "pkg.mod", "__package__": "neardup"}
    getattr_ = lazy_names(space, {"InputError": ".errors"})
    from neardup.errors import InputError

    assert getattr_("InputError") is InputError
    assert space["InputError"] is InputError
    with pytest.raises(AttributeError, match=r"module 'pkg.mod' has no attribute 'Missing'"):
        getattr_("Missing")


def test_the_program_imports_numba_without_yaml_and_scipy_unless_a_numba_config_is_there(tmp_path):
    """The `neardup` program imports numba with scipy and yaml hidden (numba goes without them:
    its SciPy version check and its config file reader); both stay importable afterwards. In a
    working folder with a .numba_config.yaml numba reads it, as without neardup: yaml is not
    hidden there."""
    import importlib.util
    _small_corpus(tmp_path / "c.jsonl", distinct=20)
    seen = _at_exit(tmp_path, "importlib.util, sys",
                    "[[m for m in ('yaml', 'scipy') if sys.modules.get(m) is not None], "
                    "[m for m in ('yaml', 'scipy') if importlib.util.find_spec(m) is not None]]")
    installed = [m for m in ("yaml", "scipy") if importlib.util.find_spec(m) is not None]
    work = tmp_path / "cwd"
    work.mkdir()
    for config_file in (False, True):
        if config_file:
            (work / ".numba_config.yaml").write_text("# read by numba\n")
        _dedup_program(tmp_path, seen, cwd=work)
        loaded, importable = json.loads(seen.path.read_text())
        assert importable == installed
        assert loaded == (["yaml"] if config_file and "yaml" in installed else [])


def test_the_dedup_program_does_not_search_the_installed_packages_for_numba_extensions(tmp_path):
    """numba looks for third-party extensions (every installed distribution's entry points) at the
    first kernel call; the `neardup dedup` program marks them loaded (its kernels use none), so
    a run, its kernels loaded or compiled, never reads the entry points. main(argv) called in
    another program leaves numba's search alone."""
    from helpers import child_env
    _small_corpus(tmp_path / "c.jsonl", distinct=7)
    seen = _at_exit(tmp_path, "importlib.metadata", "len(calls)", before=(
        "calls = []\n"
        "_entry_points = importlib.metadata.entry_points\n"
        "def _counted(*a, **k):\n"
        "    calls.append(1)\n"
        "    return _entry_points(*a, **k)\n"
        "importlib.metadata.entry_points = _counted\n"))
    _dedup_program(tmp_path, seen)
    assert json.loads(seen.path.read_text()) == 0
    assert json.loads((tmp_path / "out" / "stats.json").read_text())["counts"]["removed"] > 0
    library = (seen.setup + f"from neardup.cli import main\n"
               f"main(['dedup', {str(tmp_path / 'c.jsonl')!r}, '-o', {str(tmp_path / 'lib')!r}, '--quiet'])\n")
    r = subprocess.run([sys.executable, "-c", library], env=child_env(), capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert json.loads(seen.path.read_text()) >= 1


class _Probe(NamedTuple):
    setup: str  # Python run first in the program's process
    path: Path  # where it writes what it saw, at the process's exit


def _at_exit(tmp_path, modules: str, seen: str, before: str = "") -> _Probe:
    """A probe for a program's process: ``modules`` imported, ``before`` run, and the JSON of
    the expression ``seen`` written to a file at its exit."""
    path = tmp_path / "seen.json"
    return _Probe(f"import atexit, json, {modules}\n{before}"
                  f"atexit.register(lambda: open({str(path)!r}, 'w').write(json.dumps({seen})))\n", path)


def _dedup_program(tmp_path, probe: _Probe, cwd=None) -> None:
    """The `neardup dedup` program on tmp_path/c.jsonl to tmp_path/out (again: --overwrite) with ``probe``."""
    from helpers import child_env, neardup_command
    r = subprocess.run(neardup_command("dedup", tmp_path / "c.jsonl", "-o", tmp_path / "out", "--quiet", "--overwrite",
                                       setup=probe.setup), cwd=cwd, env=child_env(), capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0, r.stderr


def _small_corpus(path, distinct: int) -> None:
    """20 short documents, ``distinct`` of them different (the rest near duplicates of those)."""
    path.write_text("".join(json.dumps({"text": f"doc {i % distinct} " + "some words " * 5}) + "\n"
                            for i in range(20)))


def test_a_default_run_does_not_import_pyarrow_compute(tmp_path):
    """``import pyarrow.compute`` costs 25-31 CPU-ms of a run's start (issue 32), and Arrow's
    own casts, takes, filters and sorts import it: a default run builds its arrays of the right
    type from their buffers instead. A JSONL file read by the scanner (integer ids, written as
    strings) or by pyarrow (string ids), and a folder of text files, each to its report."""
    lines = [json.dumps({"id": i, "text": f"doc {i % 40} " + "shared words of a near duplicate " * 3})
             for i in range(200)]
    (tmp_path / "c.jsonl").write_text("\n".join(lines) + "\n")
    (tmp_path / "s.jsonl").write_text("\n".join(line.replace('"id": ', '"id": "s', 1).replace(', "text"', '", "text"', 1)
                                                for line in lines) + "\n")
    (tmp_path / "texts").mkdir()
    for i in range(60):
        (tmp_path / "texts" / f"{i}.txt").write_text(f"doc {i % 20} " + "shared words of a near duplicate " * 3)
    runs = [("1", "c.jsonl"), ("0", "s.jsonl"), ("", "texts")]
    r = _python(f"""
        import os, sys
        from neardup.cli import main
        for scanner, name in {runs!r}:
            os.environ["NEARDUP_JSONL_SCANNER"] = scanner
            code = main(["dedup", os.path.join({str(tmp_path)!r}, name), "--output",
                         os.path.join({str(tmp_path)!r}, "out-" + name), "--quiet"])
            print(name, code, "pyarrow.compute" in sys.modules)
    """)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["c.jsonl", "0", "False", "s.jsonl", "0", "False", "texts", "0", "False"], r.stdout + r.stderr
    for _, name in runs:
        stats = json.loads((tmp_path / f"out-{name}" / "stats.json").read_text())
        assert stats["counts"]["removed"] > 0 and (tmp_path / f"out-{name}" / "report.html").is_file()
