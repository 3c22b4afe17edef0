"""The work directory: stage outputs on disk, so that a run can stop and resume.

Every stage writes its files under ``WORK/<stage>/`` through temporary names and, once all are
in place, records itself as done in ``WORK/state.json`` together with a fingerprint of the
configuration and of the inputs (name, size, modification time). ``--resume`` skips the stages
recorded as done under the same fingerprint; a different fingerprint starts afresh.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from typing import List, Optional

import numpy as np

STAGES = ("read", "pairs", "clusters", "write")


def fingerprint(config, sources) -> str:
    relevant = config.to_dict()
    for k in ("workers", "engine", "ray_address", "batch_size"):
        relevant.pop(k, None)
    files = []
    for s in sources:
        if s.format == "table":
            files.append([s.name, "table", int(s.table.num_rows)])
            continue
        st = os.stat(s.path)
        files.append([s.name, s.path, st.st_size, st.st_mtime_ns])
    blob = json.dumps({"config": relevant, "inputs": files}, sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()


class WorkDir:
    def __init__(self, path: str, fingerprint_value: str, resume: bool):
        self.path = os.path.abspath(path)
        self.fingerprint = fingerprint_value
        state = self._load_state()
        if resume and state.get("fingerprint") == fingerprint_value:
            self.state = state
        else:
            if os.path.isdir(self.path):
                shutil.rmtree(self.path)
            self.state = {"fingerprint": fingerprint_value, "done": {}}
        os.makedirs(self.path, exist_ok=True)
        self._save_state()

    @property
    def resumed_stages(self) -> List[str]:
        return [s for s in STAGES if s in self.state["done"]]

    def _load_state(self) -> dict:
        try:
            with open(os.path.join(self.path, "state.json")) as f:
                return json.load(f)
        except (OSError, ValueError):
            return {}

    def _save_state(self) -> None:
        tmp = os.path.join(self.path, "state.json.tmp")
        with open(tmp, "w") as f:
            json.dump(self.state, f, sort_keys=True, indent=1)
        os.replace(tmp, os.path.join(self.path, "state.json"))

    def is_done(self, stage: str) -> bool:
        return stage in self.state["done"]

    def info(self, stage: str) -> dict:
        return self.state["done"][stage]

    def stage_dir(self, stage: str, fresh: bool = False) -> str:
        d = os.path.join(self.path, stage)
        if fresh and os.path.isdir(d):
            shutil.rmtree(d)
        os.makedirs(d, exist_ok=True)
        return d

    def mark_done(self, stage: str, info: Optional[dict] = None) -> None:
        self.state["done"][stage] = info or {}
        # a stage done invalidates everything after it
        after = STAGES[STAGES.index(stage) + 1:]
        for s in after:
            self.state["done"].pop(s, None)
        self._save_state()

    def file(self, stage: str, name: str) -> str:
        return os.path.join(self.path, stage, name)

    def save_arrays(self, stage: str, name: str, **arrays) -> None:
        path = self.file(stage, name)
        tmp = path + ".tmp.npz"
        np.savez(tmp, **arrays)
        os.replace(tmp, path)

    def load_arrays(self, stage: str, name: str) -> dict:
        with np.load(self.file(stage, name)) as z:
            return {k: z[k] for k in z.files}

    def remove(self) -> None:
        shutil.rmtree(self.path, ignore_errors=True)


class BackgroundWriter:
    """One thread that writes appended columns to disk while the kernels compute the next batch.

    Writing into the page cache can stall (dirty-page throttling on slow disks); with the writes
    queued here, the stall overlaps computation instead of adding to it. The queue is bounded,
    so memory stays bounded. An error in the thread is raised again by the next call.
    """

    def __init__(self, depth: int = 64):
        import queue
        import threading
        self._queue: "queue.Queue" = queue.Queue(maxsize=depth)
        self._error: Optional[BaseException] = None
        self._thread = threading.Thread(target=self._run, name="neardup-writer", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while True:
            item = self._queue.get()
            if item is None:
                return
            f, data = item
            if self._error is None:
                try:
                    f.write(data)
                except BaseException as exc:  # re-raised in the caller's thread
                    self._error = exc

    def write(self, f, data) -> None:
        self._check()
        self._queue.put((f, data))

    def drain(self) -> None:
        """Waits until everything queued is written."""
        self._queue.put(None)
        self._thread.join()
        self._check()

    def _check(self) -> None:
        if self._error is not None:
            raise self._error


class AppendFile:
    """A raw binary column appended batch by batch and read back as a memory map."""

    def __init__(self, path: str, dtype, width: int = 1, writer: Optional[BackgroundWriter] = None):
        self.path = path
        self.dtype = np.dtype(dtype)
        self.width = width
        self.count = 0
        self.writer = writer
        self._f = open(path + ".part", "wb")

    def append(self, values: np.ndarray) -> None:
        arr = np.ascontiguousarray(values, dtype=self.dtype)
        if self.writer is not None:
            # a private copy: the caller may reuse its buffer before the write happens
            self.writer.write(self._f, arr.tobytes())
        else:
            self._f.write(memoryview(arr).cast("B"))
        self.count += arr.shape[0] if self.width > 1 else arr.size

    def close(self) -> None:
        """Closes the file (after ``writer.drain()`` when a background writer is used)."""
        self._f.close()
        os.replace(self.path + ".part", self.path)


def open_column(path: str, dtype, width: int = 1, mmap: bool = True) -> np.ndarray:
    dtype = np.dtype(dtype)
    size = os.path.getsize(path)
    if size == 0:
        return np.zeros((0, width) if width > 1 else 0, dtype=dtype)
    if mmap:
        arr = np.memmap(path, dtype=dtype, mode="r")
    else:
        arr = np.fromfile(path, dtype=dtype)
    return arr.reshape(-1, width) if width > 1 else arr
