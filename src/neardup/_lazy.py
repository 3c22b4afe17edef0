"""Names a module imports on first use (PEP 562's module ``__getattr__``)."""

from __future__ import annotations

import importlib


def lazy_names(module_globals: dict, names: dict):
    """The ``__getattr__`` of the module whose globals are ``module_globals``: ``names`` maps a name
    to the module (relative to the package) it is imported from on first use; the value is then
    kept in the module's globals, so that the next use is a plain lookup."""
    module_name, package = module_globals["__name__"], module_globals["__package__"]

    def __getattr__(name):
        module = names.get(name)
        if module is None:
            raise AttributeError(f"module {module_name!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module, package), name)
        module_globals[name] = value
        return value

    return __getattr__
