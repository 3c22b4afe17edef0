"""A function run in a thread of its own beside a stage's main work (:class:`Background`)."""

from __future__ import annotations

import threading
from typing import Callable, Optional


class Background:
    """``fn()`` in a thread of its own, started at once. :meth:`wait` waits for it; :meth:`join`
    waits and raises the error ``fn`` raised, in the joining thread. ``threads``: numba's thread
    count inside it (numba's is per thread; None leaves numba's default)."""

    def __init__(self, fn: Callable[[], None], name: str, threads: Optional[int] = None):
        self.error: Optional[BaseException] = None

        def body():
            try:
                if threads is None:
                    fn()
                else:
                    from ..kernels.hashing import kernel_threads
                    with kernel_threads(threads):
                        fn()
            except BaseException as e:  # noqa: B902 (given to the joining thread)
                self.error = e

        self.thread = threading.Thread(target=body, name=name, daemon=True)
        self.thread.start()

    def wait(self) -> None:
        self.thread.join()

    def join(self) -> None:
        self.wait()
        if self.error is not None:
            raise self.error
