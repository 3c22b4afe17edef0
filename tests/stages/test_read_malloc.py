"""The read stage's malloc setting (:func:`neardup.stages.read.tune_malloc`): once per process,
glibc's thresholds raised, a setting the user made with glibc's variables kept."""

import ctypes
import sys
import threading
import time

import pytest

from neardup.kernels import minhash
from neardup.stages import read


class _Libc:
    def __init__(self):
        self.calls = []

    def mallopt(self, param, value):
        self.calls.append((param, value))
        return 1


@pytest.fixture
def libc(monkeypatch):
    fake = _Libc()
    monkeypatch.setattr(ctypes, "CDLL", lambda name: fake)
    monkeypatch.setattr(read, "_malloc_tuned", False)
    monkeypatch.delenv("MALLOC_TRIM_THRESHOLD_", raising=False)
    monkeypatch.delenv("MALLOC_MMAP_THRESHOLD_", raising=False)
    return fake


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's mallopt")
def test_thresholds_raised_once(libc):
    read.tune_malloc()
    read.tune_malloc()
    assert libc.calls == [(-3, read.MMAP_BYTES), (-1, read.TRIM_BYTES)]


@pytest.mark.parametrize("var", ["MALLOC_TRIM_THRESHOLD_", "MALLOC_MMAP_THRESHOLD_"])
def test_the_users_setting_is_kept(libc, monkeypatch, var):
    monkeypatch.setenv(var, "1000000")
    read.tune_malloc()
    assert libc.calls == []


def test_blocks_share_the_kernels_buffers(tmp_path, monkeypatch):
    """The blocks read one after another in a process use one Scratch (its pages faulted in
    once, not once a block), and their files are the bytes that fresh buffers give."""
    from neardup import Config
    from neardup import io as nio
    from neardup.stages.workdir import WorkDir, plan_blocks
    made = []

    class Counted(minhash.Scratch):
        def __init__(self):
            super().__init__()
            made.append(self)

    monkeypatch.setattr(minhash, "Scratch", Counted)  # the read stage takes it from there
    monkeypatch.setattr(read, "_scratches", [])
    for i in range(3):  # the second block's documents longer: its buffers grow, still shared
        (tmp_path / f"f{i}.jsonl").write_text("".join(f'{{"text": "doc {j} of {i} {"word " * (j + 9 * i)}"}}\n'
                                                      for j in range(20)))
    cfg = Config(verify="exact").resolved()
    sources = nio.discover([str(tmp_path / "*.jsonl")])
    blocks = plan_blocks(sources, block_bytes=1)
    files = {}
    for shared in (True, False):
        work = WorkDir(str(tmp_path / f"work-{shared}"), "fp", resume=False)
        for b, members in enumerate(blocks):
            if not shared:
                read.release_scratches()
            read.read_block(work.folder, cfg, sources, b, members)
            files[shared, b] = (tmp_path / f"work-{shared}" / "read" / f"block-{b:06d}.fp").read_bytes()
    assert len(made) == 1 + len(blocks)  # one for the shared run, one a block for the other
    assert all(files[True, b] == files[False, b] and files[True, b] for b in range(len(blocks)))
    assert len(read._scratches) == 1
    read.release_scratches()
    assert read._scratches == []


def test_kept_buffers_bounded(monkeypatch):
    monkeypatch.setattr(read, "_scratches", [])
    taken = [read.take_scratch() for _ in range(read.KEPT_SCRATCHES + 2)]
    assert len({id(s) for s in taken}) == len(taken)
    for s in taken:
        read.give_back_scratch(s)
    assert len(read._scratches) == read.KEPT_SCRATCHES
    assert read.take_scratch() in taken


def _watchers():
    return [t for t in threading.enumerate() if t.name == "neardup-idle-scratches"]


def _until(done, seconds=10.0):
    end = time.monotonic() + seconds
    while not done() and time.monotonic() < end:
        time.sleep(0.01)
    return done()


@pytest.mark.slow
def test_kept_buffers_go_once_the_process_reads_no_block(monkeypatch):
    """A process that takes no scratch for KEPT_IDLE_S lets its kept ones go (a Ray worker of
    several, which the driver's one release call does not reach); taking one calls that off; one
    watcher thread a process, however many blocks it reads. Mutations: a watcher started a block
    (``_watcher is None or ...`` -> ``True``) -> more than one; the deadline kept when a block
    takes one (``_kept_until = None`` left out of take_scratch) -> the taken block's kept one goes."""
    monkeypatch.setattr(minhash, "Scratch", object)
    monkeypatch.setattr(read, "KEPT_IDLE_S", 0.05)
    read.release_scratches()
    for _ in range(3):
        first, second = read.take_scratch(), read.take_scratch()
        read.give_back_scratch(first)
        read.give_back_scratch(second)
        assert read._scratches == [first, second]
        assert read.take_scratch() is second  # the idle release called off
        time.sleep(4 * read.KEPT_IDLE_S)
        assert read._scratches == [first]
        read.give_back_scratch(second)
        assert _until(lambda: read._scratches == [])  # no block for KEPT_IDLE_S: both let go
        assert read._kept_until is None
    assert len(_watchers()) == 1


def test_no_idle_release_where_the_read_stage_runs(monkeypatch):
    """Where the read stage runs (the local engine's process) its end releases the scratches
    (``released_at_the_end``): the blocks read meanwhile arm no idle release. Mutation: the
    ``if _stages_here: return`` of give_back_scratch left out -> a deadline set."""
    monkeypatch.setattr(minhash, "Scratch", object)
    read.release_scratches()
    with read.released_at_the_end():
        scratch = read.take_scratch()
        read.give_back_scratch(scratch)
        assert read._scratches == [scratch] and read._kept_until is None
    assert read._scratches == [] and read._stages_here == 0
