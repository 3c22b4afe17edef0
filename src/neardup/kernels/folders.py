"""Files opened by their name in their folder, the folder opened once (:func:`in_folder`): the
compiled loops that copy, read and stat the files of a folder (:mod:`neardup.kernels.filecopy`,
:mod:`neardup.kernels.fileread`, :mod:`neardup.kernels.filestat`) take whole paths, and the
operating system walked every path component by component for every file (a kept file of
``/data/corpus/files/000/000001.txt`` and its copy under ``out/.neardup-staging/kept/000``: a
dozen folders looked up a file); the files of one folder come one after another, and are opened
relative to a descriptor of their folder (``openat``, ``statx``) made once for all of them.
"""

from __future__ import annotations

import os

import numpy as np
from numba import types

from .compile import kernel

__all__ = ["folder_state", "in_folder", "release"]

# int open(const char *path, int flags, mode_t mode), int openat(int dirfd, const char *path, int
# flags, mode_t mode) and int close(int fd) of the C library (open declared with its mode: the C
# library reads it where the flags create a file, as the variadic call would pass it)
_open = types.ExternalFunction("open", types.int32(types.voidptr, types.int32, types.uint32))
_openat = types.ExternalFunction("openat", types.int32(types.int32, types.voidptr, types.int32, types.uint32))
_close = types.ExternalFunction("close", types.int32(types.int32))
AT_FDCWD = -100  # Linux: a path relative to the working folder, as open takes it
# the folder's descriptor: its path alone (O_PATH: no read permission asked, as a path's walk asks none)
_FOLDER_FLAGS = getattr(os, "O_PATH", 0) | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_CLOEXEC", 0)
_SLASH = 47


def folder_state() -> np.ndarray:
    """The state :func:`in_folder` keeps between files: the open folder's descriptor (-1: none),
    where its path starts in the names and its length, and how many folders it opened."""
    return np.array([-1, 0, 0, 0], np.int64)


@kernel(nogil=True)
def in_folder(names, start, state):
    """``(descriptor, name)``: how to open the file at the NUL-terminated path ``names[start:]``
    with ``openat`` or ``statx``: relative to the descriptor of its folder, by its name from
    ``names[name:]``. The folder is the one ``state`` (:func:`folder_state`) holds open where the
    path's folder is the same bytes, else it is opened (the one before closed). A path without a
    folder, or whose folder does not open, is given whole, with ``AT_FDCWD``: opened as ``open``
    would (and failing as it would)."""
    slash = -1
    end = start
    while names[end] != 0:
        if names[end] == _SLASH:
            slash = end
        end += 1
    if slash < 0 or slash == end - 1:
        return np.int32(AT_FDCWD), start
    length = max(slash - start, 1)  # "/NAME": the root folder, "/"
    if state[0] >= 0 and state[2] == length:
        same = True
        at = state[1]
        for k in range(length):
            if names[at + k] != names[start + k]:
                same = False
                break
        if same:
            return np.int32(state[0]), slash + 1
    release(state)
    path = np.empty(length + 1, np.uint8)
    path[:length] = names[start:start + length]
    path[length] = 0
    fd = _open(path.ctypes.data, np.int32(_FOLDER_FLAGS), np.uint32(0))
    if fd < 0:
        return np.int32(AT_FDCWD), start
    state[0] = fd
    state[1] = start
    state[2] = length
    state[3] += 1
    return np.int32(fd), slash + 1


@kernel(nogil=True)
def release(state):
    """The folder ``state`` holds open closed."""
    if state[0] >= 0:
        _close(np.int32(state[0]))
        state[0] = -1
