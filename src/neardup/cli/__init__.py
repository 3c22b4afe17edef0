"""The ``neardup`` command: parses arguments, calls the public API, nothing more.

The public API is the package ``neardup`` and its modules ``api``, ``config`` and ``errors``;
no module of this package imports anything else of neardup (tests/cli/test_cli_imports.py).

Each subcommand is a module of this package with a ``register(subparsers)`` function that sets
``func`` on its parser; it parses, calls the library, prints. A :class:`NeardupError`
(bad input, bad options) is printed as one line, ``neardup: error: ...``, with exit status 2;
Ctrl-C exits with 130 (SIGTERM with 143) at the command's next safe point, with nothing
committed (a dedup keeps its finished stages for --resume; an index is left as it was; no output
file is written); a signal after the command's commit point (an index's manifest switched, the
output published) is no interruption of it: the command finishes and exits 0.
"""

from __future__ import annotations

import argparse
import errno
import sys
from typing import List, Optional

from ..errors import NeardupError


# the subcommands: each a module of this package that registers the parser of its name (in the
# order `neardup --help` lists them)
COMMANDS = ("dedup", "signatures", "params", "report", "audit", "index")


def build_parser(argv: Optional[List[str]] = None) -> argparse.ArgumentParser:
    """The ``neardup`` parser. Given the command line ``argv`` whose first word names a command,
    with that command's parser alone: its parse of ``argv`` is the same, and a run does not make
    the others' (2.5 ms of its start, their modules imported); any other line (``--help``, a
    typo of a command) gets every command's."""
    import importlib

    from .. import __version__
    from .parser import ArgumentParser
    parser = ArgumentParser(
        prog="neardup",
        description="Find and remove near-duplicate documents with MinHash LSH.",
        epilog="Run 'neardup COMMAND --help' for the options of each command.")
    parser.add_argument("--version", action="version", version=f"neardup {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    chosen = argv[0] if argv and argv[0] in COMMANDS else None
    for name in COMMANDS if chosen is None else (chosen,):
        importlib.import_module(f".{name}", __name__).register(sub)
    return parser


def main(argv: Optional[List[str]] = None) -> int:
    """Runs the command of ``argv`` (the process's arguments when None) and returns its exit
    status. Called without ``argv`` (the ``neardup`` program, ``python -m neardup``), it keeps its
    signal handler until the process exits: a signal after the command's end changes nothing;
    and it ends the process itself once the command is over (:func:`_exit_now`): the command is
    the program's whole work."""
    program = argv is None
    if program:
        import gc
        gc.disable()  # until _program_start: the imports make objects that live as long as the process
        wanted = early_imports(sys.argv[1:])
        if wanted:
            _import_numba(numpy_only=wanted == "numpy")
    code = _main(argv, program)
    if program:
        _exit_now(code)
    return code


# Modules numba imports for what the program never uses: scipy, whose version numba checks
# (neardup's kernels use no SciPy; numba imports it again where its linear algebra is compiled),
# and yaml, to read a numba config file in the working folder (NUMBA_CONFIG_FILE: numba reads it
# when it is imported and when it compiles). 3.5 and 9 ms of each run's start-up.
NUMBA_CONFIG_FILE = ".numba_config.yaml"
# numpy's OpenBLAS starts a thread for every other core when numba imports numpy, and each one
# spins for ~0.1 s before it sleeps (measured: 75 ms of CPU of a 100k run, 7% of a 10-document
# run's), though the program makes no BLAS call worth a thread (the parameter choice's products
# are of a few hundred numbers). The variables OpenBLAS reads for its count; one set is kept.
BLAS_THREAD_VARIABLES = ("OPENBLAS_NUM_THREADS", "GOTO_NUM_THREADS", "OMP_NUM_THREADS")


# commands whose work imports numpy but never numba (no kernel runs): the program imports numpy
# alone for them (`neardup params` took 0.25 s more with numba imported for nothing)
NUMPY_COMMANDS = ("params", "report")
HELP_WORDS = ("-h", "--help", "--version")


def early_imports(argv: List[str]) -> Optional[str]:
    """What the ``neardup`` program imports before it parses the command line ``argv``
    (:func:`_import_numba`): ``"numba"`` for a command that runs kernels here, ``"numpy"`` (numpy
    alone, its BLAS set as with numba) for one that runs none (a Ray driver, :func:`on_ray`, and
    :data:`NUMPY_COMMANDS`), None where the line asks for help or the version (``-h``,
    ``--help``, ``--version`` before ``--``: nothing is run; `neardup --version` imported numba,
    0.3 s, to print one line) or names no command (the parser says what is wrong)."""
    words = argv[:argv.index("--")] if "--" in argv else argv
    if not argv or argv[0] not in COMMANDS or any(w in HELP_WORDS for w in words):
        return None
    if argv[0] in NUMPY_COMMANDS or on_ray(argv):
        return "numpy"
    return "numba"


def on_ray(argv: List[str]) -> bool:
    """Whether the command line ``argv`` runs its command on Ray: this process is then the
    driver, which runs no kernel and does not import numba (the library imports it where a
    kernel is called: 0.3-0.5 CPU-s of the driver). Read as the parser reads it, without making
    it (its imports): the last ``--engine ray`` or ``--engine=ray`` of the words before ``--``
    (after it every word is an input); no abbreviation (the parser takes none), and no option's
    value can be ``--engine`` (a word the parser knows as an option is never a value)."""
    engine = None
    words = iter(argv)
    for word in words:
        if word == "--":
            break
        if word == "--engine":
            engine = next(words, None)
        elif word.startswith("--engine="):
            engine = word[len("--engine="):]
    return engine == "ray"


def _import_numba(numpy_only: bool = False) -> None:
    """The ``neardup`` program's import of numba (every command that runs kernels imports it,
    through the library) with scipy hidden, and yaml unless the working folder has a numba config
    file (numba then reads it, as it would): an ImportError to numba, which goes without them;
    importable again afterwards; and numpy's OpenBLAS loaded with one thread
    (:data:`BLAS_THREAD_VARIABLES`: ``OPENBLAS_NUM_THREADS=1`` while numba imports numpy, then
    removed: the process's environment, which its children inherit, is as it was) unless the
    environment sets a count. ``numpy_only`` (a Ray driver, :func:`on_ray`): numpy alone, its
    OpenBLAS as with numba. Nothing is done where numba is imported already."""
    import os
    if "numba" in sys.modules:
        return
    spares = ("scipy",) if os.path.exists(NUMBA_CONFIG_FILE) else ("scipy", "yaml")
    hidden = [name for name in spares if name not in sys.modules]
    for name in hidden:
        sys.modules[name] = None  # type: ignore[assignment]
    one_blas_thread = "numpy" not in sys.modules and not any(v in os.environ for v in BLAS_THREAD_VARIABLES)
    if one_blas_thread:
        os.environ[BLAS_THREAD_VARIABLES[0]] = "1"
    if not numpy_only:
        _defer_module(DEFERRED_BY_NUMBA)
    try:
        if numpy_only:
            import numpy  # noqa: F401
        else:
            import numba  # noqa: F401
    except ImportError:  # the library's import says what is wrong, as without this
        pass
    finally:
        if one_blas_thread:
            os.environ.pop(BLAS_THREAD_VARIABLES[0], None)
        for name in hidden:
            if name in sys.modules and sys.modules[name] is None:
                del sys.modules[name]


# What numba imports at its own import and uses only where it looks for third-party extensions
# (numba.core.entrypoints.init_all, which a kernel command skips: _skip_numba_extensions):
# importlib.metadata and the email package under it, 8-13 ms of each run's start-up. It is
# imported on its first use instead, by numba's search or by anything else of the program.
DEFERRED_BY_NUMBA = "importlib.metadata"


def _defer_module(name: str):
    """Puts into sys.modules a module ``name`` that is imported on its first use (the standard
    library's importlib.util.LazyLoader: a first use from two threads at once is not safe before
    Python 3.12.3, and no thread of a run uses it); nothing where ``name`` is imported already or
    cannot be found."""
    import importlib.util
    if name in sys.modules:
        return
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        return
    if spec is None or spec.loader is None:
        return
    try:
        spec.loader = importlib.util.LazyLoader(spec.loader)
    except TypeError:  # a loader that cannot load lazily (no exec_module): imported as usual
        return
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    parent, _, child = name.rpartition(".")
    setattr(sys.modules[parent], child, module)


def _program_start(args) -> None:
    """What the ``neardup`` program does once its arguments are parsed and the library imported
    (not when ``main(argv)`` is called in another program): a command that runs the kernels in
    this process (:data:`KERNEL_COMMANDS`; ``dedup`` on the local engine) sets up numba's runtime
    (:func:`neardup._start_numba`) and has its kernels loaded without numba's check for BLAS
    (none of neardup's kernels uses BLAS; the check imports SciPy when it is installed: 0.1 s)
    and without numba's search for third-party extensions (:func:`_skip_numba_extensions`);
    then the objects made so far, modules and numba's registries, are moved out of the garbage
    collector's sight (``gc.freeze``): the collector ran over them again and again while they
    were made (0.05-0.1 s), and each full collection of the run would walk them again."""
    import gc
    try:
        command = (getattr(args, "command", None), getattr(args, "index_command", None))
        if command in KERNEL_COMMANDS and getattr(args, "engine", "local") == "local":
            from .. import _start_numba
            _start_numba(blas=False)
            _skip_numba_extensions()
            _type_plain_arrays()
    finally:
        gc.freeze()
        gc.enable()


def _skip_numba_extensions() -> None:
    """Marks numba's third-party extensions (the ``numba_extensions`` entry points of installed
    packages) as loaded, for a program that runs neardup's kernels alone: numba looks for them at
    the process's first kernel call (on the read stage's path) by reading the metadata of every
    installed distribution (``importlib.metadata.entry_points()``: 5 CPU-ms with 120 installed,
    more with more), and neardup's kernels use none. Nothing is done where numba has looked
    already; a numba without the flag ignores it."""
    try:
        from numba.core import entrypoints
    except ImportError:  # the first kernel call says what is wrong
        return
    entrypoints._already_initialized = True


def _type_plain_arrays() -> None:
    """Has numba type a plain numpy array (an argument of a kernel call whose types numba's
    compiled dispatcher has not seen yet: the first call of each kernel) without numpy.ma: numba's
    own typing asks whether the array is a masked one, and the attribute imports numpy.ma (8-10
    CPU-ms, in the read stage's first block), which a kernel command never uses otherwise. An
    array of type ``numpy.ndarray`` exactly is no masked array: it gets the type numba's own would
    give it, from the same helpers; any other array (a subclass, masked arrays among them) and a
    dtype numba does not take go to numba's own, with its errors. Nothing is done where numba's
    typing is not where this numba version keeps it."""
    try:
        import numpy as np
        from numba.core import types
        from numba.core.errors import NumbaNotImplementedError
        from numba.core.typing.typeof import typeof_impl
        from numba.np import numpy_support
        numbas = typeof_impl.dispatch(np.ndarray)
        from_dtype, map_layout = numpy_support.from_dtype, numpy_support.map_layout
    except (ImportError, AttributeError):
        return

    def typeof_array(val, c):
        if type(val) is not np.ndarray:
            return numbas(val, c)
        try:
            dtype = from_dtype(val.dtype)
        except NumbaNotImplementedError:
            return numbas(val, c)
        return types.Array(dtype, val.ndim, map_layout(val), readonly=not val.flags.writeable)

    typeof_impl.register(np.ndarray, typeof_array)


KERNEL_COMMANDS = {("dedup", None), ("signatures", None), ("audit", None), ("index", "add"), ("index", "query")}


def _exit_now(code: int) -> None:
    """Ends the process with ``code`` as the interpreter's own exit would, less its last step:
    the atexit functions run (numba's, Ray's, a coverage tool's), stdout and stderr are flushed,
    then the process exits without tearing down every module and object one by one, which with
    numba, LLVM and pyarrow loaded costs 0.2-0.3 CPU-seconds of a short run (measured at 10 and
    100,000 documents) and writes nothing. Every file of a command is closed before it returns.
    A thread of the command's still running (not a daemon) keeps the ordinary exit, which
    waits for it."""
    import atexit
    import os
    import threading
    main_thread = threading.main_thread()
    if threading.current_thread() is not main_thread or any(
            t is not main_thread and not t.daemon and t.is_alive() for t in threading.enumerate()):
        return
    _flush_std()
    atexit._run_exitfuncs()
    _flush_std()
    os._exit(code)


def _flush_std() -> None:
    for stream in (sys.stdout, sys.stderr):
        try:
            if stream is not None:
                stream.flush()
        except BrokenPipeError:  # the reader went away: what is left goes nowhere, as main() does
            _stdout_to_devnull()
        except (OSError, ValueError):
            pass


def _main(argv: Optional[List[str]], program: bool = False) -> int:
    args = None
    try:
        try:
            parser = build_parser(sys.argv[1:] if argv is None else argv)
            args = parser.parse_args(argv)
            from ..api import interrupt_handler
        finally:
            if program:
                _program_start(args)
        with interrupt_handler(to_exit=argv is None):
            return int(args.func(args) or 0)
    except NeardupError as exc:
        print(f"neardup: error: {_one_line(exc)}", file=sys.stderr)
        return 2
    except RecursionError:
        print("neardup: error: input nested too deeply to be read (Python's recursion limit)", file=sys.stderr)
        return 2
    except BrokenPipeError:  # the reader went away (`neardup index query ... | head`): not an error
        _stdout_to_devnull()
        return 0
    except OSError as exc:
        if exc.errno not in ENVIRONMENT_ERRNOS:
            raise
        # the machine's problem, not neardup's: a full disk, a folder that cannot be written
        print(f"neardup: error: {_os_error_line(exc)}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return _interrupted(args)
    except SystemError as exc:
        # Ctrl-C inside a compiled kernel surfaces as a SystemError whose context is the interrupt
        if _caused_by_interrupt(exc):
            return _interrupted(args)
        raise
    except Exception:  # a bug, not a user's mistake: the whole traceback, and a request to report it
        import traceback

        from .. import __version__
        traceback.print_exc()
        print(f"neardup {__version__}: this is a bug in neardup, not a problem with your input or options; "
              f"please report it with the traceback above", file=sys.stderr)
        return 1


# errors of the machine or of the user's folders, reported in one line (exit 2), never as a bug
ENVIRONMENT_ERRNOS = {errno.EACCES, errno.EPERM, errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.ENOTDIR,
                      errno.EISDIR, errno.ENAMETOOLONG, errno.EMFILE, errno.ENFILE, errno.ELOOP, errno.EXDEV,
                      errno.EIO, errno.EFBIG}


def _one_line(exc: BaseException) -> str:
    from ..api import redact
    from ..errors import one_line
    return redact(one_line(str(exc)))


def _os_error_line(exc: OSError) -> str:
    from ..api import redact
    where = exc.filename if exc.filename is not None else ""
    if isinstance(where, bytes):
        where = where.decode("utf-8", "backslashreplace")
    reason = exc.strerror or str(exc)
    hint = " (free some space, or choose a folder on another disk)" if exc.errno in (errno.ENOSPC, errno.EDQUOT) else ""
    return redact(f"{where}: {reason}{hint}" if where else f"{reason}{hint}")


def _stdout_to_devnull() -> None:
    """Python flushes stdout once more at exit; with the reader gone that would print a second
    BrokenPipeError ("Exception ignored ..."): what is left goes nowhere instead."""
    import os
    try:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    except (OSError, ValueError):  # no real stdout (captured in a test): nothing to flush there
        pass


def _caused_by_interrupt(exc: BaseException) -> bool:
    seen = set()
    while exc is not None and id(exc) not in seen:
        if isinstance(exc, KeyboardInterrupt):
            return True
        seen.add(id(exc))
        exc = exc.__context__ or exc.__cause__
    return False


# what an interrupted command left, in its own words
LEFT_AS_IT_WAS = {"dedup": "finished stages are kept in the work directory (use --resume)",
                  "add": "nothing was added: the index is as it was",
                  "remove": "nothing was removed: the index is as it was",
                  "compact": "nothing was compacted: the index is as it was"}


def _interrupted(args=None) -> int:
    import signal

    from ..api import last_signal
    terminated = last_signal() == signal.SIGTERM
    command = getattr(args, "index_command", None) or getattr(args, "command", None)
    left = LEFT_AS_IT_WAS.get(command, "nothing was written")
    print(f"neardup: {'terminated' if terminated else 'interrupted'}; {left}", file=sys.stderr)
    return 128 + (signal.SIGTERM if terminated else signal.SIGINT)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
