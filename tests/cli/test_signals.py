"""The command line's signals: Ctrl-C and SIGTERM stop a run at a safe point."""

from __future__ import annotations

import pytest


def test_sigterm_like_ctrl_c_stops_at_the_next_check_and_exits_143():
    """The command line's handler turns SIGINT and SIGTERM into a flag that the stages check
    between batches (nothing is torn in the middle of a kernel), a second one interrupts at once,
    and the exit status says which signal it was."""
    import os
    import signal

    from neardup import progress
    from neardup.cli import _interrupted

    before = signal.getsignal(signal.SIGTERM)
    with progress.interrupt_handler():
        assert signal.getsignal(signal.SIGTERM) is signal.getsignal(signal.SIGINT) is progress._on_signal
        progress.check_interrupt()  # nothing yet
        os.kill(os.getpid(), signal.SIGTERM)
        with pytest.raises(KeyboardInterrupt):
            progress.check_interrupt()
        with pytest.raises(KeyboardInterrupt):  # the second one at once
            os.kill(os.getpid(), signal.SIGTERM)
    assert signal.getsignal(signal.SIGTERM) is before
    assert _interrupted() == 143
    with progress.interrupt_handler():
        os.kill(os.getpid(), signal.SIGINT)
        with pytest.raises(KeyboardInterrupt):
            progress.check_interrupt()
    assert _interrupted() == 130


# --------------------------------------------------------------------------- every command, in a real process
# Each test runs a command in a fresh Python that sends itself SIGINT or SIGTERM at a point the test
# names (a step of an index write, or the first call of a function), as Ctrl-C or `kill` would.

SIGNAL_AT_STEP = """
import os, signal
import neardup.index.storage
def _signal_at(name):
    if name == {step!r}:
        os.kill(os.getpid(), signal.{sig})
neardup.index.storage.crash_hook = _signal_at
"""

SIGNAL_AT_CALL = """
import os, signal, importlib
_module = importlib.import_module({module!r})
_owner = _module
for _part in {owner!r}.split(".")[:-1]:
    _owner = getattr(_owner, _part)
_name = {owner!r}.split(".")[-1]
_original = getattr(_owner, _name)
def _signalled(*args, **kwargs):
    os.kill(os.getpid(), signal.{sig})
    return _original(*args, **kwargs)
setattr(_owner, _name, _signalled)
"""

SIGNAL_AT_EXIT = """
import atexit, os, signal, time
def _signal_at_exit():  # the signal arrives while the interpreter shuts down, after the command's report
    os.kill(os.getpid(), signal.{sig})
    time.sleep(0.2)
atexit.register(_signal_at_exit)
"""


def _texts(n, seed):
    import random
    rng = random.Random(seed)
    words = [f"w{i}" for i in range(400)]
    return [" ".join(rng.choice(words) for _ in range(40)) for _ in range(n)]


def _corpus(tmp_path, name, n=300, seed=1):
    from helpers import write_jsonl
    return write_jsonl(tmp_path / name, _texts(n, seed), ids=[f"{name}-{i}" for i in range(n)])


def _run(tmp_path, *args, setup):
    import subprocess

    from helpers import child_env, neardup_command
    return subprocess.run(neardup_command(*args, setup=setup), env=child_env(), capture_output=True, text=True,
                          timeout=300, cwd=tmp_path)


def _index_state(ix):
    """The manifest's bytes and the segment folders on disk: what an interrupted command must not change."""
    import os
    with open(os.path.join(ix, "manifest.json"), "rb") as f:
        manifest = f.read()
    return manifest, sorted(os.listdir(os.path.join(ix, "segments")))


@pytest.fixture
def index_of_one(tmp_path):
    from helpers import run_cli
    ix = str(tmp_path / "ix")
    assert run_cli("index", "add", ix, _corpus(tmp_path, "a.jsonl"), "--id-column", "id") == 0
    return ix


@pytest.mark.parametrize("sig,code", [("SIGTERM", 143), ("SIGINT", 130)])
@pytest.mark.slow
def test_a_signal_before_an_adds_commit_leaves_the_index_as_it_was(tmp_path, index_of_one, sig, code):
    """A signal while the add writes its segment: exit 130/143 at the commit point at the latest,
    the manifest and the segments as they were (a retrying script adds nothing twice)."""
    before = _index_state(index_of_one)
    p = _run(tmp_path, "index", "add", index_of_one, _corpus(tmp_path, "b.jsonl", seed=2), "--id-column", "id",
             setup=SIGNAL_AT_STEP.format(step="segment_written", sig=sig))
    assert p.returncode == code, p.stderr
    assert "nothing was added" in p.stderr and "Traceback" not in p.stderr, p.stderr
    assert "added" not in p.stdout
    assert _index_state(index_of_one) == before


@pytest.mark.slow  # a Python started per case: the inner loop keeps one of each kind
@pytest.mark.parametrize("at", ["after_manifest_switch", "exit"])
def test_a_signal_after_an_adds_commit_is_no_interruption(tmp_path, index_of_one, at):
    """A SIGTERM once the manifest is switched (or while the process shuts down after its report):
    the add is reported and the exit status is 0, never 143 after "added 300 documents"."""
    from neardup.index import Index
    setup = (SIGNAL_AT_EXIT.format(sig="SIGTERM") if at == "exit"
             else SIGNAL_AT_STEP.format(step=at, sig="SIGTERM"))
    p = _run(tmp_path, "index", "add", index_of_one, _corpus(tmp_path, "b.jsonl", seed=2), "--id-column", "id",
             setup=setup)
    assert p.returncode == 0, p.stderr
    assert "added 300" in p.stdout + p.stderr, (p.stdout, p.stderr)
    assert Index(index_of_one).stats()["documents"] == 600


@pytest.mark.slow  # a Python started per case: the inner loop keeps one of each kind
def test_a_signal_during_a_remove_or_a_compact_leaves_the_index_as_it_was(tmp_path, index_of_one):
    """remove and compact write their segments (tombstones, merged segments) before one switch:
    a signal before it stops them with nothing changed."""
    from helpers import run_cli
    assert run_cli("index", "add", index_of_one, _corpus(tmp_path, "b.jsonl", seed=2), "--id-column", "id") == 0
    before = _index_state(index_of_one)
    p = _run(tmp_path, "index", "remove", index_of_one, "--source", str(tmp_path / "b.jsonl"),
             setup=SIGNAL_AT_STEP.format(step="segment_written", sig="SIGTERM"))
    assert p.returncode == 143 and "nothing was removed" in p.stderr, p.stderr
    assert _index_state(index_of_one) == before
    p = _run(tmp_path, "index", "compact", index_of_one,
             setup=SIGNAL_AT_STEP.format(step="segment_written", sig="SIGINT"))
    assert p.returncode == 130 and "nothing was compacted" in p.stderr, p.stderr
    assert _index_state(index_of_one) == before


@pytest.mark.slow  # a Python started per case: the inner loop keeps one of each kind
def test_a_signal_during_a_query_writes_no_answers(tmp_path, index_of_one):
    """A signal while the queries run: exit 143 at the next batch, no output file."""
    out = tmp_path / "answers.jsonl"
    p = _run(tmp_path, "index", "query", index_of_one, _corpus(tmp_path, "b.jsonl", seed=2), "--output", out,
             "--batch-size", "100",
             setup=SIGNAL_AT_CALL.format(module="neardup.index.core", owner="Index.query", sig="SIGTERM"))
    assert p.returncode == 143, p.stderr
    assert "Traceback" not in p.stderr and not out.exists(), p.stderr
    assert "terminated; nothing was written" in p.stderr, p.stderr  # a query has no stages to --resume


@pytest.mark.slow  # a Python started per case: the inner loop keeps one of each kind
def test_a_signal_during_an_audit_stops_it_before_its_files(tmp_path):
    """A signal while the audit measures: exit 130 between its phases, no --json file written."""
    out = tmp_path / "audit.json"
    p = _run(tmp_path, "audit", _corpus(tmp_path, "a.jsonl"), "--json", out, "--sample", "50",
             setup=SIGNAL_AT_CALL.format(module="neardup.report.audit", owner="_Pool.of", sig="SIGINT"))
    assert p.returncode == 130, (p.stdout, p.stderr)
    assert "Traceback" not in p.stderr and not out.exists(), p.stderr
    assert "interrupted; nothing was written" in p.stderr, p.stderr


@pytest.mark.slow
def test_a_signal_once_a_run_publishes_is_no_interruption(tmp_path, index_of_one):
    """A signal while the run publishes its result and adds its kept documents to the index
    (--update-index): past the run's commit point, so the result and the index update are made
    whole and the exit status is 0 (mutation: drop commit_point() before out.publish in run.py
    -> exit 130 with stats.json gone and the output half published)."""
    import json

    from neardup.index import Index
    out = tmp_path / "out"
    p = _run(tmp_path, "dedup", _corpus(tmp_path, "b.jsonl", seed=2), "-o", out, "--id-column", "id", "--against",
             index_of_one, "--update-index", "-q",
             setup=SIGNAL_AT_CALL.format(module="neardup.stages.against", owner="update_index", sig="SIGINT"))
    assert p.returncode == 0, p.stderr
    assert json.loads((out / "stats.json").read_text())["index_update"]["added"] == 300
    assert Index(index_of_one).stats()["documents"] == 600


@pytest.mark.slow  # a Python started per case: the inner loop keeps one of each kind
def test_a_signal_before_a_run_publishes_leaves_the_old_result_whole(tmp_path):
    """A signal that arrives after the last stage's last check (while report.html is drawn):
    the run stops at its commit point with 130, the earlier result whole (mutation: drop
    commit_point() before out.publish in run.py -> the signal goes unnoticed and the result is
    replaced, exit 0)."""
    out = tmp_path / "out"
    src = _corpus(tmp_path, "a.jsonl")
    from helpers import run_cli
    assert run_cli("dedup", src, "-o", out, "-q") == 0
    before = (out / "stats.json").read_bytes()
    p = _run(tmp_path, "dedup", src, "-o", out, "-q", "--overwrite", "--ngram", "3",
             setup=SIGNAL_AT_CALL.format(module="neardup.report.html", owner="write_report", sig="SIGINT"))
    assert p.returncode == 130, p.stderr
    assert (out / "stats.json").read_bytes() == before


# --------------------------------------------------------------------------- the program's own exit

PROGRAM_EXIT_SETUP = """
import atexit, sys, threading, time
import neardup.cli
atexit.register(lambda: open({atexit_file!r}, "w").write("atexit ran"))
def late():
    time.sleep(0.3)
    open({thread_file!r}, "w").write("thread finished")
exit_now = neardup.cli._exit_now
def with_a_thread(code):
    if {thread}:
        threading.Thread(target=late).start()  # still running when the command is over: not a daemon
    exit_now(code)
neardup.cli._exit_now = with_a_thread
"""


@pytest.mark.parametrize("thread", [False, True])
@pytest.mark.slow
def test_the_program_ends_its_process_as_the_interpreter_would(tmp_path, thread):
    """`neardup` ends its own process once the command is over (no module teardown), yet as the
    interpreter's exit would: every line it printed comes out (stdout to a pipe is buffered), the
    atexit functions run, and a thread still running (not a daemon) is waited for."""
    import subprocess

    from helpers import child_env, neardup_command
    files = {"atexit_file": str(tmp_path / "atexit"), "thread_file": str(tmp_path / "thread")}
    env = child_env()
    env.pop("PYTHONUNBUFFERED", None)
    r = subprocess.run(neardup_command("params", "--threshold", "0.8", setup=PROGRAM_EXIT_SETUP.format(
        thread=thread, **files)), env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert "bands" in r.stdout and r.stdout.endswith("\n"), r.stdout  # the whole table, to its last line
    assert (tmp_path / "atexit").read_text() == "atexit ran"
    assert (tmp_path / "thread").exists() is thread
