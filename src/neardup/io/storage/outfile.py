"""A file written where the user says (``-o FILE``, ``--json``, ``--plot``, a report's
``--output``): checked before any work, written whole.

:func:`check_output_file` refuses, in one line, a path that is not neardup's to write (an input
of the command, a file inside a folder it reads, a folder, an existing file without
``--overwrite``); :func:`publish_file` writes the bytes under a new temporary name in the same
folder and gives it the name: renamed over the old file with ``overwrite``, else linked, which
fails if a file of that name appeared meanwhile. Local paths, and where the command allows it
(``remote_ok``) a URL: checked by name against the inputs and for existence, and written as one
upload (an object appears whole or not at all; a store offers no "create if absent", so a file
that appears between the check and the upload is replaced). :func:`publish_with` (a writer that
fills a temporary file) is for local paths only.
"""

from __future__ import annotations

import errno
import os
from pathlib import Path
from typing import Callable, Sequence, Union

from ...errors import ConfigError
from .fs import exists, new_temp, remote_errors, write_bytes
from .paths import is_url, redact, same_location


same_file = same_location


def _same_inode(a, b) -> bool:
    """Whether two existing local paths are one file (a hard link counts)."""
    try:
        return os.path.samefile(os.fspath(a), os.fspath(b))
    except (OSError, ValueError):
        return False


def check_output_file(path, *, inputs: Sequence = (), inside: Sequence = (), overwrite: bool = False,
                      option: str = "--output", remote_ok: bool = False) -> None:
    """Refuse, before any work and in one line (ConfigError), to write a local file at ``path``
    that is not neardup's to write: one of ``inputs`` or a file under a folder of ``inside``
    (compared by real path, so a link or another spelling of the same file counts), a folder,
    a file in a folder that does not exist, or an existing file unless ``overwrite``. A URL is
    refused unless ``remote_ok``; then it is refused when it is one of ``inputs`` or lies under
    a folder of ``inside`` (URLs compared by name), or exists and not ``overwrite``."""
    p = os.fspath(path)
    if is_url(p):
        if not remote_ok:
            raise ConfigError(f"{option} {redact(p)}: this writes a local file; give a local path")
        _check_output_object(p, inputs, inside, overwrite, option)
        return
    real = os.path.realpath(p)
    for inp in inputs:
        if is_url(os.fspath(inp)):
            continue  # a remote input is never this local file
        if os.path.realpath(os.fspath(inp)) == real or _same_inode(inp, p):
            raise ConfigError(f"{option} {redact(p)}: that is an input of this command "
                              f"({redact(os.fspath(inp))}); name another file")
    for folder in inside:
        if is_url(os.fspath(folder)) or not os.path.isdir(os.fspath(folder)):
            continue  # a file among the folders read: compared above as an input
        top = os.path.realpath(os.fspath(folder))
        if real == top or real.startswith(top.rstrip(os.sep) + os.sep):
            raise ConfigError(f"{option} {redact(p)}: that is inside {redact(os.fspath(folder))}, which "
                              f"this command reads; name a file elsewhere")
    if os.path.isdir(p):
        raise ConfigError(f"{option} {redact(p)}: that is a folder; name a file")
    parent = os.path.dirname(os.path.abspath(p))
    if not os.path.isdir(parent):
        if os.path.lexists(parent):
            raise ConfigError(f"cannot write {redact(p)}: {redact(parent)} is not a folder")
        raise ConfigError(f"cannot write {redact(p)}: the folder {redact(parent)} does not exist")
    if os.path.lexists(p) and not overwrite:
        raise ConfigError(f"{option} {redact(p)}: it exists; give --overwrite to replace it, or name "
                          f"another file")


def _check_output_object(url: str, inputs: Sequence, inside: Sequence, overwrite: bool, option: str) -> None:
    """check_output_file for a URL (see there)."""
    name = url.rstrip("/")
    for inp in inputs:
        inp = os.fspath(inp)
        if is_url(inp) and inp.rstrip("/") == name:
            raise ConfigError(f"{option} {redact(url)}: that is an input of this command ({redact(inp)}); "
                              f"name another file")
    for folder in inside:
        folder = os.fspath(folder)
        top = folder.rstrip("/")
        if is_url(folder) and (name == top or name.startswith(top + "/")):
            raise ConfigError(f"{option} {redact(url)}: that is inside {redact(folder)}, which this command "
                              f"reads; name a file elsewhere")
    if not overwrite:
        with remote_errors(url):  # the URL as given: translate redacts the whole message
            there = exists(url)
        if there:
            raise ConfigError(f"{option} {redact(url)}: it exists; give --overwrite to replace it, or name "
                              f"another file")


def publish_file(path, data: bytes, *, overwrite: bool = False, option: str = "--output") -> Union[Path, str]:
    """Write ``data`` to the file ``path`` so that it appears whole or not at all (a local file:
    see :func:`publish_with`; a URL: one upload, see the module docstring). Returns the file
    written: a Path for a local file, the URL for an object."""
    p = os.fspath(path)
    if is_url(p):
        with remote_errors(p):  # the URL as given: translate redacts the whole message
            write_bytes(p, data)
        return p

    def write(tmp: str) -> None:
        with open(tmp, "wb") as fh:
            fh.write(data)

    publish_with(p, write, overwrite=overwrite, option=option)
    return Path(p)


def publish_with(path, write: Callable[[str], None], *, overwrite: bool = False, option: str = "--output") -> None:
    """Make the local file ``path`` with ``write(tmp)``, which fills a new temporary file in the
    same folder; the file appears whole or not at all.

    The temporary file (flushed to disk) then takes the name: renamed over ``path`` with
    ``overwrite``, else linked to it, which fails if a file of that name appeared meanwhile (a
    ConfigError: nothing is replaced). Any failure (a folder that cannot be written, a full
    disk) is a one-line ConfigError naming the path, and the temporary file is removed."""
    p = os.fspath(path)
    folder = os.path.dirname(os.path.abspath(p))
    tmp = None
    try:
        fd, tmp = new_temp(folder, os.path.basename(p))
        os.close(fd)
        write(tmp)
        fd = os.open(tmp, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        if overwrite:
            os.replace(tmp, p)
            tmp = None
        else:
            _link_new(tmp, p)
    except FileExistsError:
        raise ConfigError(f"{option} {redact(p)}: it exists; give --overwrite to replace it, or name "
                          f"another file") from None
    except OSError as exc:
        raise ConfigError(f"cannot write {redact(p)}: {redact(exc.strerror or exc)}") from None
    finally:
        if tmp is not None:
            try:
                os.unlink(tmp)
            except OSError:
                pass


def _link_new(tmp: str, path: str) -> None:
    """Give the file ``tmp`` the new name ``path`` (FileExistsError when it exists): a hard link,
    or where the file system has none, a check and a rename."""
    try:
        os.link(tmp, path)
    except FileExistsError:
        raise
    except OSError as exc:
        if exc.errno not in (errno.EPERM, errno.EOPNOTSUPP, errno.ENOTSUP, errno.EXDEV, errno.EMLINK,
                             errno.ENOSYS):
            raise
        if os.path.lexists(path):
            raise FileExistsError(errno.EEXIST, "exists", path) from None
        os.replace(tmp, path)
