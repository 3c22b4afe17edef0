"""The ``neardup`` program's import of numba leaves importlib.metadata (and the email package under
it) unimported: numba, and anything else of the program, hold a module that imports it on its
first use."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

from helpers import child_env

PROBE = textwrap.dedent("""
    import json, sys
    from neardup.cli import DEFERRED_BY_NUMBA, _import_numba
    _import_numba()
    import numba.core.entrypoints as entrypoints
    held = entrypoints.importlib_metadata
    seen = {"email": "email.message" in sys.modules, "numba_holds": type(held).__name__,
            "in_sys_modules": type(sys.modules[DEFERRED_BY_NUMBA]).__name__}
    import importlib.metadata
    seen["later_is_held"] = importlib.metadata is held
    # the module loads itself when used (numba's search for extensions, or any other)
    seen["works"] = hasattr(importlib.metadata.entry_points(), "select")
    seen["then"] = type(held).__name__
    print(json.dumps(seen))
""")


def test_the_program_imports_numba_without_importlib_metadata():
    r = subprocess.run([sys.executable, "-c", PROBE], env=child_env(), capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout) == {"email": False, "numba_holds": "_LazyModule", "in_sys_modules": "_LazyModule",
                                    "later_is_held": True,
                                    "works": True, "then": "module"}


def test_a_module_whose_loader_cannot_load_lazily_is_left_to_its_usual_import(monkeypatch):
    import importlib.machinery
    import importlib.util

    from neardup.cli import _defer_module

    class EagerOnly:  # a loader of the old protocol: load_module, no exec_module
        def load_module(self, name):
            raise AssertionError("not to be loaded here")

    spec = importlib.machinery.ModuleSpec("neardup_probe_eager", EagerOnly())
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: spec)
    _defer_module("neardup_probe_eager")
    assert "neardup_probe_eager" not in sys.modules
