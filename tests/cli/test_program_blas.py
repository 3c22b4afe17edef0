"""The ``neardup`` program's import of numba loads numpy's OpenBLAS with one thread (no threads
spinning at start-up), and leaves the environment as it found it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

from helpers import child_env
from neardup.cli import BLAS_THREAD_VARIABLES

PROBE = textwrap.dedent("""
    import ctypes, json, os, sys
    from neardup.cli import _import_numba
    _import_numba(numpy_only=bool(os.environ.get("PROBE_NUMPY_ONLY")))
    libs = [line.split()[-1] for line in open("/proc/self/maps") if "openblas" in line.rsplit("/", 1)[-1].lower()]
    threads = None
    if libs:
        blas = ctypes.CDLL(libs[0])
        for name in ("scipy_openblas_get_num_threads64_", "openblas_get_num_threads64_", "openblas_get_num_threads"):
            if hasattr(blas, name):
                threads = getattr(blas, name)()
                break
    print(json.dumps({"threads": threads, "env": {v: os.environ.get(v) for v in %r}, "numba": "numba" in sys.modules}))
""" % (BLAS_THREAD_VARIABLES,))


def _probe(**env) -> dict:
    e = {k: v for k, v in child_env().items() if k not in BLAS_THREAD_VARIABLES}
    e.update(env)
    r = subprocess.run([sys.executable, "-c", PROBE], env=e, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self/maps")
def test_the_program_loads_openblas_with_one_thread_and_the_environment_as_it_was():
    got = _probe()
    if got["threads"] is None:
        pytest.skip("numpy is not linked against OpenBLAS here")
    assert got["threads"] == 1
    assert got["env"] == {v: None for v in BLAS_THREAD_VARIABLES}  # children get no setting of neardup's


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self/maps")
@pytest.mark.skipif((os.cpu_count() or 1) < 2, reason="OpenBLAS runs one thread on one core whatever is asked")
def test_a_count_the_user_set_is_kept():
    got = _probe(OPENBLAS_NUM_THREADS="2")
    if got["threads"] is None:
        pytest.skip("numpy is not linked against OpenBLAS here")
    assert got["threads"] == 2
    assert got["env"]["OPENBLAS_NUM_THREADS"] == "2"


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self/maps")
def test_a_ray_driver_loads_numpy_alone_its_openblas_with_one_thread():
    """``--engine ray`` (:func:`neardup.cli.on_ray`): numpy without numba, as numba would load it."""
    got = _probe(PROBE_NUMPY_ONLY="1")
    assert got["numba"] is False
    if got["threads"] is None:
        pytest.skip("numpy is not linked against OpenBLAS here")
    assert got["threads"] == 1
    assert got["env"] == {v: None for v in BLAS_THREAD_VARIABLES}
