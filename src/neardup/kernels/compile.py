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
import io
import os
import pickle
import struct
import sys
import threading

import llvmlite
import llvmlite.binding as ll
import numba as nb
from numba.core import caching
from numba.core.codegen import JITCodeLibrary
from numba.core.compiler import CompileResult
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
# numba's rebuild of the library then parses the kernel's bitcode (kept for linking it into a
# kernel compiled later) and walks its functions and globals through LLVM, call by call, for the
# names it defines: two thirds of a load. :func:`_rebuilt` reads those names from the object
# code's symbol table (the same set: tests/kernels/test_process_state.py) and parses the bitcode
# only when a compilation links the library (:class:`_ObjectLibrary`): the 15 kernels a dedup
# loads, 80 ms of CPU with numba's rebuild, take 26 ms.


def _load(files, sig, target_context):
    """numba's ``FunctionCache.load_overload`` without the refresh it needs not."""
    try:
        cache_file = files._cache_file
        index, data_path = cache_file._load_index, cache_file._data_path
        index_key, rebuild, guard = files._index_key, files._impl.rebuild, files._guard_against_spurious_io_errors
        enabled = files._enabled
    except AttributeError:  # another numba's internals: its own load
        return files.load_overload(sig, target_context)
    if not enabled:
        return None
    start_runtime(target_context)  # once per process
    with guard():
        data = _cached_data(index, data_path, index_key(sig, target_context.codegen()))
        if data is None:
            return None
        if not _resolved(data, target_context):
            target_context.refresh()
        return _rebuilt(target_context, data) or rebuild(target_context, data)
    return None  # the guard swallowed an error (numba's behaviour: compiled anew)


def _cached_data(index, data_path, key):
    """numba's ``_CacheFile.load`` of the kernel of ``key`` (None where the index has none, or
    its file cannot be read), unpickled by :class:`_KernelUnpickler`."""
    name = index().get(key)
    if name is None:
        return None
    try:
        with open(data_path(name), "rb") as f:
            return _KernelUnpickler(io.BytesIO(f.read())).load()
    except OSError:
        return None


# A kernel's cached data holds the environments of its functions and of the functions of numba's
# it calls (array allocation, sorting): numba rebuilds each with its module's globals, importing
# the module (numba.np.arrayobj, which imports numba's string and hashing modules: ~25 ms of
# the first kernel load of a run, on the read stage's path). No-python code never reads an
# environment's globals (only numba's object mode does); what it reads, the constants, is in the
# data. :func:`_environment` gives such an environment a dict holding the module's name alone
# where the module is not imported, as a kernel compiled without it would need; numba's own
# rebuild otherwise (and for every environment numba rebuilds itself: other programs' functions).

class _KernelUnpickler(pickle.Unpickler):
    def find_class(self, module, name):
        if (module, name) == ("numba.core.environment", "_rebuild_env"):
            return _environment
        return super().find_class(module, name)


def _environment(modname, consts, env_name):
    """numba's ``_rebuild_env``, without importing ``modname`` where it is not imported."""
    from numba.core.environment import Environment, _rebuild_env, lookup_environment
    if not modname or modname in sys.modules or lookup_environment(env_name) is not None:
        return _rebuild_env(modname, consts, env_name)
    env = Environment({"__name__": modname})
    env.consts[:] = consts
    env.env_name = env_name
    Environment._memo[env_name] = env
    return env


def _resolved(data, target_context) -> bool:
    """Whether every symbol the cached kernel's object code links against is known to LLVM."""
    try:
        _name, kind, (object_code, _bitcode) = data[0]
        symbols = elf_symbols(object_code) if kind == "object" else None
        return symbols is not None and _linkable(symbols[0], target_context.codegen())
    except Exception:  # a layout this code does not know: numba's way
        return False


def _linkable(undefined, codegen) -> bool:
    engine = codegen._engine
    return all(ll.address_of_symbol(n) or engine.is_symbol_defined(n) for n in undefined)


def elf_symbols(obj: bytes):
    """(undefined names, set of defined names) of an ELF64 little-endian relocatable object
    (numba's object code on Linux x86-64 and aarch64), the section and file symbols left out;
    None for any other format."""
    if len(obj) < 64 or obj[:4] != b"\x7fELF" or obj[4] != 2 or obj[5] != 1:
        return None
    shoff, = struct.unpack_from("<Q", obj, 0x28)
    shentsize, shnum = struct.unpack_from("<HH", obj, 0x3A)
    sections = [struct.unpack_from("<IIQQQQIIQQ", obj, shoff + i * shentsize) for i in range(shnum)]
    undefined, defined = [], set()
    for _, sh_type, _, _, offset, size, link, _, _, entsize in sections:
        if sh_type != 2:  # SHT_SYMTAB
            continue
        strings = sections[link][4]
        for at in range(offset, offset + size, entsize or 24):
            name, info, _, shndx = struct.unpack_from("<IBBH", obj, at)
            if not name or info & 0xF in (3, 4):  # STT_SECTION, STT_FILE
                continue
            start = strings + name
            symbol = obj[start:obj.index(b"\0", start)].decode("ascii", "replace")
            if shndx == 0:  # SHN_UNDEF
                undefined.append(symbol)
            else:
                defined.add(symbol)
    return undefined, defined


class _ObjectLibrary(JITCodeLibrary):
    """numba's library of a kernel rebuilt from its object code, as numba's own rebuild makes it,
    but for the module that a kernel compiled later links in (numba parses the cached bitcode for
    it when it loads the kernel): parsed when first asked for, under numba's compiler lock as every
    compilation runs."""

    def __init__(self, codegen, name, bitcode: bytes):
        self._bitcode = bitcode
        super().__init__(codegen, name)

    @property
    def _shared_module(self):
        if self._shared is None and self._bitcode is not None:
            self._shared, self._bitcode = ll.parse_bitcode(self._bitcode), None
        return self._shared

    @_shared_module.setter
    def _shared_module(self, module):
        self._shared = module


def _rebuilt(target_context, data):
    """numba's ``CompileResult._rebuild`` of a cached kernel (numba 0.68's, step by step) with the
    library made as :class:`_ObjectLibrary` and its defined names read from its object code; None
    where the data, the codegen or numba's rebuild is not the kind this knows (numba's own rebuild
    then, before anything was done)."""
    try:
        libdata, fndesc, env, signature, objectmode, lifted, typeann, reload_init, referenced_envs = data
        name, kind, (object_code, bitcode) = libdata
    except (TypeError, ValueError):
        return None
    codegen = target_context.codegen()
    symbols = elf_symbols(object_code) if kind == "object" and isinstance(object_code, bytes) else None
    if symbols is None or codegen._library_class is not JITCodeLibrary or not _known_rebuild():
        return None
    for fn in reload_init or ():
        fn()
    library = _object_library(codegen, name, object_code, bitcode, symbols[1])
    cfunc = target_context.get_executable(library, fndesc, env)
    cres = CompileResult(target_context=target_context, typing_context=target_context.typing_context,
                         library=library, environment=env, entry_point=cfunc, fndesc=fndesc,
                         type_annotation=typeann, signature=signature, objectmode=objectmode, lifted=lifted,
                         typing_error=None, call_helper=None, metadata=None, reload_init=reload_init,
                         referenced_envs=referenced_envs)
    for referenced in referenced_envs:
        library.codegen.set_env(referenced.env_name, referenced)
    return cres


def _object_library(codegen, name: str, object_code: bytes, bitcode: bytes, defined) -> _ObjectLibrary:
    """numba's CPUCodeLibrary._unserialize of object code, its bitcode left to _ObjectLibrary and
    the names it defines (``defined``) read from its symbol table."""
    library = _ObjectLibrary(codegen, name, bitcode)
    library.enable_object_caching()
    library._set_compiled_object(object_code)
    library._finalize_final_module()
    codegen._engine._defined_symbols |= defined
    return library


# numba's rebuild as :func:`_rebuilt` follows it: a fingerprint of the names, variables and
# constants of CompileResult._rebuild and CPUCodeLibrary._unserialize (numba 0.68); a numba whose
# rebuild differs keeps its own
_NUMBA_REBUILD = "81a888ee6e368933"


@functools.lru_cache(maxsize=1)
def _known_rebuild() -> bool:
    def shape(func) -> str:
        code = func.__code__
        return repr((code.co_names, code.co_varnames, code.co_consts))
    try:
        seen = shape(CompileResult._rebuild.__func__) + shape(JITCodeLibrary._unserialize.__func__)
    except AttributeError:
        return False
    return hashlib.sha1(seen.encode()).hexdigest()[:16] == _NUMBA_REBUILD


# --------------------------------------------------------------------------- numba's runtime
# numba compiles its runtime's functions (NRT: reference counts, atomics; the kernels link
# against them) with LLVM in every process, when the runtime starts: 20 ms of CPU in each run,
# the same code each time for one numba on one machine. :func:`start_runtime` keeps their
# object code in :func:`cache_dir` (written by the first process that compiles them) and
# rebuilds the library from it as a cached kernel is rebuilt (:func:`_object_library`; the
# runtime's start then takes 3 ms); numba compiles them as before where that cannot be done
# (another codegen or rebuild, a damaged file, a symbol LLVM does not know, a folder that cannot
# be written).


def start_runtime(target_context) -> None:
    """numba's ``rtsys.initialize(target_context)`` (once per process: numba's runtime started,
    NRT's symbols registered), its library of NRT functions rebuilt from neardup's cache when it
    is there: numba's own initialize runs, with :func:`_runtime_library` in place of numba's
    compile of that library for the moment it runs (numba's compiler lock held: numba calls it
    there only)."""
    from numba.core.compiler_lock import global_compiler_lock
    from numba.core.runtime import nrtdynmod, rtsys
    if getattr(rtsys, "_init", False):
        return
    with global_compiler_lock:
        compile_nrt = nrtdynmod.compile_nrt_functions
        nrtdynmod.compile_nrt_functions = functools.partial(_runtime_library, compile_nrt)
        try:
            rtsys.initialize(target_context)
        finally:
            nrtdynmod.compile_nrt_functions = compile_nrt


def _runtime_library(compile_nrt, target_context):
    """The library of NRT's functions: rebuilt from its object code kept in the cache, else
    compiled as numba does (``compile_nrt``, numba's own, where this code does not know numba's
    codegen or rebuild) and its object code kept for the next process."""
    from numba.core.runtime import nrtdynmod
    codegen = target_context.codegen()
    if codegen._library_class is not JITCodeLibrary or not _known_rebuild():
        return compile_nrt(target_context)
    path = _runtime_path(codegen)
    library = _cached_runtime(path, codegen)
    if library is not None:
        return library
    ir_module, library = nrtdynmod.create_nrt_module(target_context)  # numba's compile_nrt_functions,
    library.enable_object_caching()                                   # its object code kept
    library.add_ir_module(ir_module)
    library.finalize()
    _name, _kind, (object_code, bitcode) = library.serialize_using_object_code()
    with contextlib.suppress(OSError):  # a folder that cannot be written: compiled in each process
        os.makedirs(os.path.dirname(path), exist_ok=True)
        temporary = f"{path}.{os.getpid()}.{threading.get_ident()}.tmp"
        with open(temporary, "wb") as f:
            f.write(_RUNTIME_MAGIC + struct.pack("<QQ", len(object_code), len(bitcode)) + object_code + bitcode)
        os.replace(temporary, path)
    return library


_RUNTIME_MAGIC = b"neardup-nrt-1\0"


def _runtime_path(codegen) -> str:
    """The runtime's cache file: named for llvmlite's version and the codegen's target (triple,
    CPU, features); numba's version is in :func:`cache_dir`'s name."""
    key = hashlib.sha1(repr((ll.llvm_version_info, llvmlite.__version__, codegen.magic_tuple())).encode())
    return os.path.join(cache_dir(), f"nrt-{key.hexdigest()[:16]}.bin")


def _cached_runtime(path: str, codegen):
    """The runtime's library rebuilt from ``path``; None when the file is missing or not one this
    code wrote, or its object code links against a symbol LLVM does not know."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError:
        return None
    head = len(_RUNTIME_MAGIC) + 16
    if len(data) < head or not data.startswith(_RUNTIME_MAGIC):
        return None
    n_object, n_bitcode = struct.unpack_from("<QQ", data, len(_RUNTIME_MAGIC))
    if head + n_object + n_bitcode != len(data):
        return None
    object_code, bitcode = data[head:head + n_object], data[head + n_object:]
    try:
        symbols = elf_symbols(object_code)
        if symbols is None or not _linkable(symbols[0], codegen):
            return None
    except (struct.error, IndexError, ValueError):  # a damaged symbol table
        return None
    return _object_library(codegen, "nrt", object_code, bitcode, symbols[1])


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
