"""What neardup changes in the process that imports it: nothing at import; numba's threads started
with OpenMP's passive wait policy and the environment as it was; numba's disk cache of the kernels
in a folder of neardup's own, per source, numba version and install; and what one step of a run
hands the next goes through the run, not through a module's memory."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

SRC = Path(__file__).resolve().parents[2] / "src"


def _python(code: str, *args: str, src=SRC, timeout: float = 300, **env) -> subprocess.CompletedProcess:
    e = {k: v for k, v in os.environ.items() if k != "OMP_WAIT_POLICY"}
    e.update(PYTHONPATH=str(src), **env)
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code), *args], env=e, capture_output=True,
                          text=True, timeout=timeout)


@pytest.mark.slow
def test_import_changes_nothing_in_the_process(tmp_path):
    """No environment variable, numba setting, thread, exit or fork hook, cache folder: all of them
    are made (where at all) by the first run, not by ``import neardup`` (nor its API and CLI)."""
    r = _python(f"""
        import atexit, json, os, threading, traceback
        env = dict(os.environ)
        import numba
        cache_dir = numba.config.CACHE_DIR
        hooks = []  # (what, the file that asked for it) of every hook registered from now on

        def recording(what, real):
            def register(*args, **kwargs):
                hooks.append((what, traceback.extract_stack()[-2].filename))
                return real(*args, **kwargs)
            return register

        atexit.register = recording("atexit", atexit.register)
        os.register_at_fork = recording("fork", os.register_at_fork)
        threading.Thread.start = recording("thread", threading.Thread.start)
        import neardup, neardup.api, neardup.cli
        import numba.np.ufunc.parallel as parallel
        print(json.dumps({{
            "env": dict(os.environ) == env,
            "cache_dir": numba.config.CACHE_DIR == cache_dir,
            "threads": [t.name for t in threading.enumerate()],
            "numba_threads": bool(parallel._is_initialized),
            "neardup_hooks": [h for h in hooks if h[1].startswith({str(SRC)!r})],
            "made": sorted(os.listdir({str(tmp_path)!r})),
        }}))
    """, HOME=str(tmp_path / "home"), NUMBA_CACHE_DIR=str(tmp_path / "numba"))
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout) == {"env": True, "cache_dir": True, "threads": ["MainThread"], "numba_threads": False,
                                    "neardup_hooks": [], "made": []}


_RUNS = {
    # a whole run: numba's threads are started by its first block of kernel calls (kernel_threads)
    "dedup": """
        texts = ["document %d with some words that repeat in it" % (i % 7) for i in range(40)]
        assert neardup.dedup(texts, output=sys.argv[1], threshold=0.8).stats["counts"]["removed"] > 0
    """,
    # a parallel kernel called on its own: by its first compile or load
    "kernel": """
        import numpy as np
        from neardup.kernels.verify import estimated_jaccard
        sigs = np.array([[1, 2, 3, 4], [1, 2, 3, 5]], np.uint32)
        assert estimated_jaccard(sigs, np.array([0]), np.array([1])).tolist() == [0.75]
    """,
}


@pytest.mark.slow  # a fresh Python process per case
@pytest.mark.parametrize("entry,policy", [("dedup", None), ("dedup", "ACTIVE"), ("kernel", None)])
def test_numba_threads_start_passive_and_the_environment_is_left_as_it_was(tmp_path, entry, policy):
    code = "import json, os, sys\nimport numba, neardup\n" + textwrap.dedent(_RUNS[entry]) + (
        "print(json.dumps({'policy': os.environ.get('OMP_WAIT_POLICY'), 'layer': numba.threading_layer()}))")
    env = {"OMP_DISPLAY_ENV": "verbose", **({} if policy is None else {"OMP_WAIT_POLICY": policy})}
    r = _python(code, str(tmp_path / "out"), timeout=600, **env)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["policy"] == policy  # removed after numba's threads started, or the user's kept
    if out["layer"] != "omp":
        pytest.skip(f"numba's threading layer here is {out['layer']}, not OpenMP")
    # what libgomp read when numba loaded it (OMP_DISPLAY_ENV): passive workers do not spin
    assert ("GOMP_SPINCOUNT = '0'" in r.stderr) is (policy is None), r.stderr
    assert f"OMP_WAIT_POLICY = '{policy or 'PASSIVE'}'" in r.stderr


def _clone(tmp_path, name) -> Path:
    """A copy of neardup's sources (without their bytecode) in a folder of its own."""
    shutil.copytree(SRC / "neardup", tmp_path / name / "neardup", ignore=shutil.ignore_patterns("__pycache__"))
    return tmp_path / name


_CACHE_DIR = "from neardup.kernels import compile; print(compile.cache_dir())"


@pytest.mark.slow  # fresh Python processes
def test_the_cache_folder_is_per_source_and_numba_version(tmp_path):
    a, b = _clone(tmp_path, "a"), _clone(tmp_path, "b")
    parent = tmp_path / "numba"

    def cache_dir(src, **env):
        r = _python(_CACHE_DIR, src=src, **{"NUMBA_CACHE_DIR": str(parent), **env})
        assert r.returncode == 0, r.stderr
        return Path(r.stdout.strip())

    first = cache_dir(a)
    assert first.parent == parent
    import numba
    from neardup import __version__
    assert first.name.startswith(f"{__version__}-") and first.name.endswith(f"-numba{numba.__version__}")
    assert cache_dir(b) == first  # the same source
    with open(b / "neardup" / "stages" / "write.py", "a") as f:  # no kernel reads it: nothing to compile
        f.write("\n# an edit\n")
    assert cache_dir(b) == first
    with open(b / "neardup" / "kernels" / "components.py", "a") as f:  # not a file of the kernel: its callees count too
        f.write("\n# an edit\n")
    assert cache_dir(b) != first
    second = cache_dir(b)
    with open(b / "neardup" / "config" / "options.py", "a") as f:  # the declarations the kernels read count too
        f.write("\n# an edit\n")
    assert cache_dir(b) not in (first, second)
    home = cache_dir(a, HOME=str(tmp_path / "home"), NUMBA_CACHE_DIR="")
    assert home == tmp_path / "home" / ".cache" / "neardup" / "numba" / first.name


_KERNEL = """
    import json, sys
    import numba
    if len(sys.argv) > 1:
        numba.__version__ = sys.argv[1]  # as another environment's numba would stamp its index
    import pyarrow as pa
    from neardup.kernels import hashing  # a small kernel: what is tested is where its code is kept
    hashing.string_hash(pa.array(["one", "two", "three"]))
    stats = hashing._fnv1a_kernel.stats
    print(json.dumps({"hits": sum(stats.cache_hits.values()), "misses": sum(stats.cache_misses.values()),
                      "path": stats.cache_path}))
"""


@pytest.mark.slow
def test_two_installs_and_two_numba_versions_keep_their_compiled_kernels(tmp_path):
    """numba stamps a kernel's index with the source file's state and its own version and keeps
    only one index per function and folder: neither another install of the same source nor another
    numba version may overwrite the one of an install, or each would recompile after the other."""
    a, b = _clone(tmp_path, "a"), _clone(tmp_path, "b")

    def run(src, *numba_version):
        r = _python(_KERNEL, *numba_version, src=src, NUMBA_CACHE_DIR=str(tmp_path / "numba"))
        assert r.returncode == 0, r.stderr
        return json.loads(r.stdout)

    first_a, first_b = run(a), run(b)
    assert (first_a["misses"], first_b["misses"]) == (1, 1)  # compiled
    assert first_a["path"] != first_b["path"] and Path(first_a["path"]).parent == Path(first_b["path"]).parent
    assert run(a) == {**first_a, "hits": 1, "misses": 0}  # loaded: b did not evict it
    other = run(a, "0.0.0+other")
    assert other["misses"] == 1
    assert run(a) == {**first_a, "hits": 1, "misses": 0}  # the other numba did not evict it either
    assert other["path"] != first_a["path"]


def test_the_read_plan_takes_the_sizes_the_run_identity_found(tmp_path, monkeypatch):
    """run_identity asks the file system for the inputs' sizes (a store: one request per file);
    the read plan of the same run takes them from the run's identity instead of asking again."""
    from neardup import Config
    from neardup import io as nio
    from neardup.stages import identity, workdir
    for i, size in enumerate((100, 300, 50)):
        (tmp_path / f"f{i}.txt").write_text("x" * size)
    sources = nio.discover([str(tmp_path / "*.txt")])
    identity = identity.run_identity(Config().resolved(), sources)
    work = workdir.WorkDir(str(tmp_path / "work"), identity)
    assert workdir.plan_blocks(sources, block_bytes=350) == [[0], [1, 2]]
    monkeypatch.setattr(workdir, "BLOCK_BYTES", 350)

    def asked(*args):
        raise AssertionError("the file system was asked again")

    monkeypatch.setattr(workdir.fs, "infos", asked)
    monkeypatch.setattr(workdir.fs, "info", asked)
    assert work.plan(sources) == [[0], [1, 2]]


# a child's prelude: numba's context refreshes counted in ``calls``
COUNT_REFRESHES = """
        import json
        import numpy as np
        import numba.core.base
        calls = []
        real = numba.core.base.BaseContext.refresh
        def refresh(self):
            calls.append(1)
            return real(self)
        numba.core.base.BaseContext.refresh = refresh
"""


@pytest.mark.slow
def test_a_cached_kernel_loads_without_numba_refreshing_its_contexts():
    """A kernel in numba's disk cache is rebuilt from its object code without numba's typing and
    target contexts refreshed (every registry of numba imported and installed: 0.1-0.3 s of a
    process); it runs as compiled. The first process may compile it (numba refreshes then)."""
    code = COUNT_REFRESHES + """
        from neardup.kernels.components import select_representatives
        sel = select_representatives(5, np.array([0, 1, 3]), np.array([1, 2, 4]), np.array([0.9, 0.9, 0.8]))
        print(json.dumps({"refreshed": len(calls), "removed": sel.removed.tolist(), "cluster": sel.cluster.tolist()}))
    """
    r = _python(code)  # compiles the kernels when they are not cached yet
    assert r.returncode == 0, r.stderr
    r = _python(code)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout) == {"refreshed": 0, "removed": [False, True, False, False, True],
                                    "cluster": [0, 0, 0, 3, 3]}


@pytest.mark.slow
def test_a_kernel_linking_an_unknown_symbol_is_loaded_the_way_numba_does():
    """Where the object code needs a symbol LLVM does not know yet (one a registry module of numba
    adds), or is not ELF, the contexts are refreshed before the kernel is rebuilt, as numba does."""
    code = COUNT_REFRESHES + """
        from neardup.kernels import compile
        real_symbols = compile.elf_symbols
        compile.elf_symbols = lambda obj: (real_symbols(obj)[0] + ["neardup_no_such_symbol"], real_symbols(obj)[1])
        from neardup.kernels.components import connected_components
        labels = connected_components(4, np.array([0, 2]), np.array([1, 3]))
        print(json.dumps({"refreshed": len(calls) > 0, "labels": labels.tolist()}))
    """
    _python(code)  # compiled, when not cached yet
    r = _python(code)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout) == {"refreshed": True, "labels": [0, 0, 2, 2]}


@pytest.mark.parametrize("kernel", ["components._components_kernel", "hashing._fnv1a_kernel",
                                    "components._select_kernel"])
def test_the_symbols_of_a_kernels_object_code(kernel):
    """The object code's undefined names (what it links against) and its defined names: the set
    numba's own rebuild reads from the kernel's bitcode, which the load takes from the object
    code instead (:func:`neardup.kernels.compile._rebuilt`)."""
    import importlib

    import llvmlite.binding as ll
    from numba.core.codegen import JitEngine

    from neardup.kernels import compile
    from neardup.kernels.components import connected_components, select_representatives
    from neardup.kernels.hashing import string_hash
    connected_components(3, np.array([0]), np.array([1]))  # compiled or loaded: in the cache now
    select_representatives(3, np.array([0]), np.array([1]), np.array([0.9]))
    string_hash(pa.array(["a b"]))
    module, name = kernel.split(".")
    files = getattr(importlib.import_module(f"neardup.kernels.{module}"), name)._cache.files()._cache_file
    entries = [files.load(key) for key in files._load_index()]
    assert entries
    for data in entries:
        _name, kind, (obj, bitcode) = data[0]
        undefined, defined = compile.elf_symbols(obj)
        assert "PyArg_UnpackTuple" in undefined  # numba's wrapper unpacks the arguments
        assert not any(n.startswith("_ZN") and name in n for n in undefined)  # defined in it
        numbas = type("Engine", (), {"_defined_symbols": set()})()
        JitEngine._load_defined_symbols(numbas, ll.parse_bitcode(bitcode))
        assert defined == numbas._defined_symbols
        assert any(name in n for n in defined)
    assert compile.elf_symbols(b"\xcf\xfa\xed\xfe" + bytes(60)) is None  # Mach-O: not read
    assert compile.elf_symbols(b"") is None


@pytest.mark.slow  # a fresh Python compiling a kernel: ~2 s
def test_a_loaded_kernel_links_into_a_kernel_compiled_later():
    """A kernel loaded from the cache is rebuilt by neardup's load (its bitcode not parsed); a
    function compiled afterwards that calls it links it (the bitcode parsed then) and computes
    what the kernel computes alone."""
    code = """
        import json
        import numba
        import numpy as np
        from neardup.kernels import compile
        from neardup.kernels.hashing import _fnv1a_kernel
        offsets, data = np.array([0, 3, 3, 8], np.int64), np.frombuffer(b"abcdefgh", np.uint8)
        alone = _fnv1a_kernel(offsets, data).tolist()
        library = next(iter(_fnv1a_kernel.overloads.values())).library
        lazy = isinstance(library, compile._ObjectLibrary) and library._shared is None

        @numba.njit
        def flipped(offsets, data):
            return _fnv1a_kernel(offsets, data) ^ np.uint64(1)

        linked = (flipped(offsets, data) ^ np.uint64(1)).tolist()
        print(json.dumps({"lazy": lazy, "parsed": library._shared is not None, "same": linked == alone,
                          "known": compile._known_rebuild()}))
    """
    _python(code)  # compiled, when not cached yet
    r = _python(code)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout) == {"lazy": True, "parsed": True, "same": True, "known": True}


@pytest.mark.slow  # fresh Pythons loading numba: ~6 s
def test_numbas_runtime_is_rebuilt_from_the_cache(tmp_path):
    """numba's runtime (NRT: its reference counts and atomics, which the kernels link against)
    is compiled by the first process and kept in the kernels' cache; the next one rebuilds it
    from its object code (numba's compile of it not called). Kernels loaded from the cache and a
    function compiled afterwards (linking NRT: it allocates and frees arrays and a list) compute
    what they compute with numba's own runtime; a cache file that is not the runtime's is
    compiled over."""
    code = """
        import json, os
        import numba
        import numpy as np
        from numba.core.runtime import nrtdynmod, rtsys
        from neardup.kernels import compile
        from neardup.kernels.hashing import _fnv1a_kernel
        compiled = []
        real = nrtdynmod.create_nrt_module
        nrtdynmod.create_nrt_module = lambda ctx: (compiled.append(1), real(ctx))[1]
        offsets, data = np.array([0, 3, 3, 8], np.int64), np.frombuffer(b"abcdefgh", np.uint8)
        hashes = _fnv1a_kernel(offsets, data).tolist()

        @numba.njit
        def allocates(n):
            a = np.arange(n)
            b = [a[i] * 2 for i in range(n)]
            return a.sum() + len(b) + b[-1]

        names = [f for f in os.listdir(compile.cache_dir()) if f.startswith("nrt-")]
        print(json.dumps({"compiled": len(compiled), "rebuilt": isinstance(rtsys.library, compile._ObjectLibrary),
                          "hashes": hashes, "allocates": int(allocates(10)), "files": len(names),
                          "leaks": rtsys.get_allocation_stats().alloc - rtsys.get_allocation_stats().free}))
    """
    cache = str(tmp_path / "numba")
    runs = [_python(code, NUMBA_CACHE_DIR=cache, NUMBA_NRT_STATS="1") for _ in range(2)]
    for r in runs:
        assert r.returncode == 0, r.stderr
    first, second = (json.loads(r.stdout) for r in runs)
    def fnv1a(b: bytes) -> int:
        h = 0xCBF29CE484222325
        for c in b:
            h = ((h ^ c) * 0x100000001B3) % 2 ** 64
        return h
    want = {"hashes": [fnv1a(b"abc"), fnv1a(b""), fnv1a(b"defgh")], "allocates": 45 + 10 + 18, "files": 1,
            "leaks": 0}
    assert first == {**want, "compiled": 1, "rebuilt": False}
    assert second == {**want, "compiled": 0, "rebuilt": True}
    # a damaged file (cut short) is not taken: compiled again, and written whole again
    nrt, = Path(cache).rglob("nrt-*.bin")
    nrt.write_bytes(nrt.read_bytes()[:-1])
    r = _python(code, NUMBA_CACHE_DIR=cache, NUMBA_NRT_STATS="1")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout) == {**want, "compiled": 1, "rebuilt": False}
    r = _python(code, NUMBA_CACHE_DIR=cache, NUMBA_NRT_STATS="1")
    assert json.loads(r.stdout) == {**want, "compiled": 0, "rebuilt": True}


@pytest.mark.slow  # a fresh Python: ~2.5 s
def test_a_cached_kernel_loads_without_importing_the_modules_of_its_environments():
    """A kernel loaded from the cache whose functions call numba's array allocation (their
    environments name numba.np.arrayobj) does not import that module (~25 ms: numba's string and
    hashing modules with it); it computes as compiled, and a function compiled afterwards that
    calls it (numba then imports the module) computes the same. Environments of modules already
    imported are numba's own, with their module's globals."""
    code = """
        import json, sys
        import numba
        import numpy as np
        from numba.core.environment import Environment
        from neardup.kernels import lines
        data = np.frombuffer(b"a\\nbb\\n\\nccc", np.uint8)
        nl, ascii_ = lines._newlines(data)
        envs = [e for e in list(Environment._memo.values()) if e.env_name]
        by_module = {}
        for e in envs:
            by_module.setdefault(e.globals.get("__name__"), set()).add(e.globals is vars(sys.modules[e.globals["__name__"]])
                                                                       if e.globals.get("__name__") in sys.modules
                                                                       else len(e.globals))
        loaded = "numba.np.arrayobj" in sys.modules

        @numba.njit
        def twice(data):
            nl, ascii_ = lines._newlines(data)
            return np.concatenate((nl, nl))

        again = twice(data).tolist()
        print(json.dumps({"imported": loaded, "newlines": nl.tolist(), "again": again,
                          "arrayobj": sorted(by_module.get("numba.np.arrayobj", ())),
                          "own": sorted(by_module.get("neardup.kernels.lines", ()))}))
    """
    _python(code)  # compiled, when not cached yet
    r = _python(code)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["imported"] is False
    assert out["arrayobj"] == [1]  # the module's name alone
    assert out["own"] == [True]  # the kernel module's own globals
    assert out["newlines"] == [1, 4, 5] and out["again"] == [1, 4, 5, 1, 4, 5]
