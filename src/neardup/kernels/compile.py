"""neardup's numba kernels: where numba keeps their compiled code, how it is loaded, and numba's
threads.

Nothing here acts at import: a kernel's cache folder is chosen, made and read when the kernel is
first compiled or loaded, and numba's threads are started by the first block of kernel calls
(:class:`neardup.kernels.hashing.kernel_threads`) or the first parallel kernel. numba's own settings
(``numba.config.CACHE_DIR``) and the environment are left as they were, so that the process's
other numba code keeps its cache where it was.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import os
import struct
import sys
import threading

import numba as nb
from numba.core import caching
from numba.core.dispatcher import Dispatcher

from .._version import __version__


def kernel(**options):
    """``numba.njit(**options)`` with numba's disk cache (``cache=True``) in :func:`cache_dir`."""
    def decorate(func):
        dispatcher = nb.njit(**options)(func)
        if isinstance(dispatcher, Dispatcher):  # NUMBA_DISABLE_JIT=1 gives back the plain function
            dispatcher._cache = _KernelCache(func, parallel=bool(options.get("parallel")))
        return dispatcher
    return decorate


def cache_dir() -> str:
    """The folder of neardup's compiled kernels: ``<parent>/<neardup version>-<hash of the
    kernels' sources>-numba<numba version>``, the parent being ``numba.config.CACHE_DIR``
    (``$NUMBA_CACHE_DIR``) or ``~/.cache/neardup/numba``.

    - numba keys a cached kernel on its own file only; a kernel that calls a kernel of another
      module would keep running the old callee after that module changed (an upgrade, an edit):
      a folder per hash of the kernels' sources (:data:`KERNEL_SOURCES`) makes any change of
      them start from a clean cache, while an edit elsewhere in neardup compiles nothing.
    - numba keeps one index per function, stamped with its numba version, which it overwrites
      when another numba version compiles the function: two environments of another numba that
      use the same source folder (an editable install in two venvs) would each recompile after
      the other ran, hence numba's version in the name.
    - Inside, numba makes a sub-folder per source folder (named for a hash of its absolute path):
      two installs of the same source (a clone and a copy of it, two venvs) each keep their own.
    """
    parent = nb.config.CACHE_DIR or os.path.join(os.path.expanduser("~"), ".cache", "neardup", "numba")
    return os.path.join(parent, f"{__version__}-{_source_hash()}-numba{nb.__version__}")


# What a kernel's compiled code can depend on: the kernels (this folder, where every kernel is
# defined and which calls nothing but kernels of this folder) and the declarations they read.
KERNEL_SOURCES = ("kernels", "config/options.py")


@functools.lru_cache(maxsize=1)
def _source_hash() -> str:
    package = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    digest = hashlib.sha1()
    for entry in KERNEL_SOURCES:
        top = os.path.join(package, entry)
        paths = [top] if os.path.isfile(top) else []
        for root, dirs, files in os.walk(top):
            dirs[:] = sorted(d for d in dirs if d != "__pycache__")
            paths.extend(os.path.join(root, f) for f in sorted(files) if f.endswith(".py"))
        for path in paths:
            with open(path, "rb") as f:
                digest.update(os.path.relpath(path, package).encode() + b"\0" + f.read())
    return digest.hexdigest()[:16]


class _Locator(caching._SourceFileBackedLocatorMixin, caching._CacheLocator):
    """numba's locator for ``NUMBA_CACHE_DIR`` (a sub-folder per source folder), in :func:`cache_dir`."""

    def __init__(self, py_func, py_file):
        self._py_file = py_file
        self._lineno = py_func.__code__.co_firstlineno
        self._cache_path = os.path.join(cache_dir(), self.get_suitable_cache_subpath(py_file))

    def get_cache_path(self):
        return self._cache_path


class _Impl(caching.CompileResultCacheImpl):
    # numba's own locators after ours, as before: a folder that cannot be made or written
    # (a read-only home) falls back to the __pycache__ folders
    _locator_classes = [_Locator, *caching.CompileResultCacheImpl._locator_classes]


class _FunctionCache(caching.FunctionCache):
    _impl_class = _Impl


class _KernelCache(caching._Cache):
    """numba's disk cache of one kernel, made when numba first asks it for the kernel (numba asks
    before it compiles; it makes its own cache, by contrast, when the function is decorated)."""

    def __init__(self, func, parallel: bool):
        self._func = func
        self._parallel = parallel
        self._files = None

    def files(self) -> caching.FunctionCache:
        if self._files is None:  # numba asks under its compiler lock; two made at once would be equal
            self._files = _FunctionCache(self._func)
        return self._files

    @property
    def cache_path(self):
        return self.files().cache_path

    def load_overload(self, sig, target_context):
        if self._parallel:  # numba starts its threads when it compiles or loads a parallel kernel
            start_threads()
        with _blas_check_skipped():  # the kernel's environment may import numba.np.arraymath
            loaded = _load(self.files(), sig, target_context)
            if loaded is None:  # numba compiles it next, its contexts refreshed first: here, as the rest
                target_context.refresh()
            return loaded

    def save_overload(self, sig, data):
        self.files().save_overload(sig, data)

    def enable(self):
        self.files().enable()

    def disable(self):
        self.files().disable()

    def flush(self):
        self.files().flush()


def is_cached(dispatcher) -> bool:
    """Whether numba's disk cache holds ``dispatcher`` (a :func:`kernel`) compiled: numba's own
    check, an index written by this numba, stamped for the source file as it is now (an index
    numba would ignore counts as missing). numba's cache layout is not public: callers that
    only print a message catch what this raises."""
    return bool(dispatcher._cache.files()._cache_file._load_index())


# --------------------------------------------------------------------------- loading a kernel
# numba's own load (FunctionCache.load_overload) first refreshes its target context: it imports
# and installs every typing and lowering registry numba has (0.1-0.3 s, most of numba's set-up in
# a process) though rebuilding a kernel from its object code lowers nothing. Of that set-up the
# object code needs numba's runtime (NRT: initialised here, 20 ms) and the symbols it links
# against: numba's C helpers and CPython's (registered when numba is imported), its thread pool's
# (when a parallel kernel starts the threads, above). :func:`_resolved` reads the object's
# undefined symbols (ELF: a table read, well under a millisecond): one that LLVM cannot resolve
# (a symbol a registry module adds, or an object in another format) and the context is
# refreshed first, as numba does. A kernel that is not in the cache is compiled by numba, which
# refreshes the contexts itself.


def _load(files, sig, target_context):
    """numba's ``FunctionCache.load_overload`` without the refresh it needs not."""
    try:
        load = files._cache_file.load
        index_key, rebuild, guard = files._index_key, files._impl.rebuild, files._guard_against_spurious_io_errors
        enabled = files._enabled
    except AttributeError:  # another numba's internals: its own load
        return files.load_overload(sig, target_context)
    if not enabled:
        return None
    from numba.core.runtime import rtsys
    rtsys.initialize(target_context)  # once per process
    with guard():
        data = load(index_key(sig, target_context.codegen()))
        if data is None:
            return None
        if not _resolved(data, target_context):
            target_context.refresh()
        return rebuild(target_context, data)
    return None  # the guard swallowed an error (numba's behaviour: compiled anew)


def _resolved(data, target_context) -> bool:
    """Whether every symbol the cached kernel's object code links against is known to LLVM."""
    try:
        _name, kind, (object_code, _bitcode) = data[0]
        names = undefined_symbols(object_code) if kind == "object" else None
        if names is None:
            return False
        import llvmlite.binding as ll
        engine = target_context.codegen()._engine
        return all(ll.address_of_symbol(n) or engine.is_symbol_defined(n) for n in names)
    except Exception:  # a layout this code does not know: numba's way
        return False


def undefined_symbols(obj: bytes):
    """The undefined symbols of an ELF64 little-endian relocatable object (numba's object code on
    Linux x86-64 and aarch64); None for any other format."""
    if len(obj) < 64 or obj[:4] != b"\x7fELF" or obj[4] != 2 or obj[5] != 1:
        return None
    shoff, = struct.unpack_from("<Q", obj, 0x28)
    shentsize, shnum = struct.unpack_from("<HH", obj, 0x3A)
    sections = [struct.unpack_from("<IIQQQQIIQQ", obj, shoff + i * shentsize) for i in range(shnum)]
    names = []
    for _, sh_type, _, _, offset, size, link, _, _, entsize in sections:
        if sh_type != 2:  # SHT_SYMTAB
            continue
        strings = sections[link][4]
        for at in range(offset, offset + size, entsize or 24):
            name, _, _, shndx = struct.unpack_from("<IBBH", obj, at)
            if name and shndx == 0:  # SHN_UNDEF
                start = strings + name
                names.append(obj[start:obj.index(b"\0", start)].decode("ascii", "replace"))
    return names


# numba checks once, when numba.np.arraymath is first imported, whether SciPy's BLAS is there
# (it then imports scipy.linalg: 0.1-0.2 s). A kernel whose environment names that module imports
# it when it is loaded. A process that runs neardup's kernels alone (the command line: none of
# them uses BLAS) skips the check (:func:`skip_blas_check`); numba's np.correlate then takes its
# own loop, and numba's linear algebra compiled later still imports SciPy.
_blas_check = True


def skip_blas_check() -> None:
    global _blas_check
    _blas_check = False


@contextlib.contextmanager
def _blas_check_skipped():
    block = (not _blas_check and "scipy.linalg.cython_blas" not in sys.modules
             and "numba.np.arraymath" not in sys.modules)
    if block:
        sys.modules["scipy.linalg.cython_blas"] = None  # an ImportError for numba's check: no BLAS
    try:
        yield
    finally:
        if block and sys.modules.get("scipy.linalg.cython_blas", 0) is None:
            del sys.modules["scipy.linalg.cython_blas"]


# --------------------------------------------------------------------------- numba's threads

_start_lock = threading.Lock()


def start_threads() -> None:
    """Starts numba's threading layer, once per process, with OpenMP's passive wait policy
    unless the environment sets one.

    With the OpenMP layer, libgomp's default wait policy keeps idle workers spinning after every
    parallel region, on the cores the reading thread (JSON parsing, decompression) and the
    writing thread need: measured ~10% of a run's CPU time on 2 cores. Passive workers sleep.
    libgomp reads ``OMP_WAIT_POLICY`` once, when it is loaded, which numba does when it starts
    its threads; so the variable is set just for that moment, never at import, and removed
    afterwards: the process's environment is as it was. (A process that had already started
    numba's threads, or loaded libgomp for another library, keeps the policy it started with.)
    A local run gets here before it starts its reading thread: no thread of neardup's reads the
    environment meanwhile.
    """
    with _start_lock:
        try:
            nb.threading_layer()
            return  # started
        except ValueError:
            pass
        set_here = "OMP_WAIT_POLICY" not in os.environ  # a value the user set is kept
        if set_here:
            os.environ["OMP_WAIT_POLICY"] = "PASSIVE"
        try:
            nb.get_num_threads()
        finally:
            if set_here:
                del os.environ["OMP_WAIT_POLICY"]
