"""Helpers the test modules share, imported by name (``from helpers import run_cli``): tests/conftest.py
puts tests/ on sys.path. The fixtures (the S3 and Redis servers) are in tests/conftest.py."""

from __future__ import annotations

import contextlib
import gzip
import io
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Dict, List, NamedTuple, Optional

import pytest
import zstandard

from neardup.errors import InputError
from neardup.io import read_source

ROOT = Path(__file__).resolve().parents[1]  # the checkout
SRC = str(ROOT / "src")


# --------------------------------------------------------------------------- the command line

def run_cli(*args) -> int:
    """``neardup ARGS`` in this process (what ``python -m neardup`` runs): the exit code; what it
    prints goes to this process's stdout and stderr (``capsys`` reads them)."""
    from neardup.cli import main

    return main([str(a) for a in args])


class Ran(NamedTuple):
    """What :func:`run_in_process` gives: the fields of the ``subprocess.CompletedProcess`` that
    :func:`run_process` gives, so that a test reads both alike (or unpacks ``code, out, err``)."""
    returncode: int
    stdout: str
    stderr: str


def run_in_process(*args, cwd=None) -> Ran:
    """``neardup ARGS`` in this process, in the folder ``cwd`` if given, its stdout and stderr
    captured. argparse's own errors exit through SystemExit: its status is returned as main()'s."""
    out, err = io.StringIO(), io.StringIO()
    old = os.getcwd()
    try:
        if cwd:
            os.chdir(cwd)
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                code = run_cli(*args)
            except SystemExit as exc:
                code = exc.code
    finally:
        os.chdir(old)
    return Ran(code, out.getvalue(), err.getvalue())


def child_env(env=None) -> dict:
    """``env`` (this process's environment by default) with this checkout's src/ first on PYTHONPATH:
    what a child Python needs to import the neardup under test."""
    e = dict(os.environ if env is None else env)
    rest = [p for p in e.get("PYTHONPATH", "").split(os.pathsep) if p and p != SRC]
    e["PYTHONPATH"] = os.pathsep.join([SRC, *rest])
    return e


def neardup_command(*args, setup: str = "", crash_at: Optional[str] = None) -> List[str]:
    """The command line that runs ``neardup ARGS`` in a fresh Python (run it with :func:`child_env`),
    for a test that starts, kills or waits on the process itself. ``setup``: Python run first;
    ``crash_at``: a step of an index write (see neardup.index.storage.crash_point) where the
    process kills itself with SIGKILL, as ``kill -9`` would."""
    args = [str(a) for a in args]
    if not setup and crash_at is None:
        return [sys.executable, "-m", "neardup", *args]
    if crash_at is not None:
        setup += _KILL_AT.format(point=crash_at)
    # main() without arguments reads sys.argv[1:] (ARGS), as the installed ``neardup`` program does
    return [sys.executable, "-c", setup + "\nimport sys\nfrom neardup.cli import main\nsys.exit(main())\n", *args]


_KILL_AT = """
import os, signal
import neardup.index.storage
def _kill_at(name):
    if name == {point!r}:
        os.kill(os.getpid(), signal.SIGKILL)
neardup.index.storage.crash_hook = _kill_at
"""


def run_process(*args, env=None, cwd=None, block=(), timeout=300) -> subprocess.CompletedProcess:
    """``neardup ARGS`` in a fresh Python process, its output captured as text. ``env``: its
    environment (see :func:`child_env`); ``block``: modules whose import fails there, as if the extra
    that brings them were not installed."""
    hide = "".join(f"sys.modules[{m!r}] = None; " for m in block)
    code = f"import runpy, sys; {hide}runpy.run_module('neardup', run_name='__main__', alter_sys=True)"
    return subprocess.run([sys.executable, "-c", code, *map(str, args)], capture_output=True, text=True,
                          env=child_env(env), cwd=cwd, timeout=timeout)


def fail_message(src, **kw) -> str:
    """The one-line InputError that reading ``src`` to its end raises."""
    with pytest.raises(InputError) as ei:
        for _ in read_source(src, **kw):
            pass
    msg = str(ei.value)
    assert "\n" not in msg and "\r" not in msg
    return msg


# --------------------------------------------------------------------------- corpora

def jsonl(records) -> bytes:
    """``records`` (dicts) as JSON lines, UTF-8, other than ASCII characters as they are."""
    return "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records).encode("utf-8")


def write_jsonl(path, docs, ids=None):
    """A JSONL file at ``path``, gzip or zstd compressed when its name ends with .gz or .zst; returns
    ``path``. ``docs``: records (dicts, written as they are) or texts, written as
    ``{"id": ids[i], "text": text}``, or ``{"text": text}`` without ``ids``."""
    records = [d if isinstance(d, dict) else {"text": d} if ids is None else {"id": ids[i], "text": d}
               for i, d in enumerate(docs)]
    data = jsonl(records)
    name = os.fspath(path)
    if name.endswith(".gz"):
        with gzip.GzipFile(name, "wb", mtime=0) as f:
            f.write(data)
    else:
        with open(name, "wb") as f:
            f.write(zstandard.ZstdCompressor().compress(data) if name.endswith(".zst") else data)
    return path


# --------------------------------------------------------------------------- servers on the loopback interface
# (the fixtures that start them are in tests/conftest.py)

def free_port() -> int:
    """A TCP port nothing listens on now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


FAKE_AWS_ENV = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
                "AWS_DEFAULT_REGION": "us-east-1", "AWS_REGION": "us-east-1"}


def s3_env(endpoint: str) -> Dict[str, str]:
    """The environment that points boto, s3fs and neardup at ``endpoint`` (for subprocesses)."""
    return dict(FAKE_AWS_ENV, AWS_ENDPOINT_URL=endpoint)


class S3:
    """One bucket on the test S3 server: ``url(key)``, ``put(key, bytes)``, ``get(key)``, ``keys(prefix)``."""

    def __init__(self, endpoint: str, bucket: str):
        import boto3

        self.endpoint = endpoint
        self.bucket = bucket
        self.client = boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1",
                                   aws_access_key_id="testing", aws_secret_access_key="testing")

    def url(self, key: str = "") -> str:
        return f"s3://{self.bucket}/{key}" if key else f"s3://{self.bucket}"

    def put(self, key: str, data) -> str:
        if isinstance(data, str):
            data = data.encode("utf-8")
        self.client.put_object(Bucket=self.bucket, Key=key, Body=data)
        return self.url(key)

    def get(self, key: str) -> bytes:
        return self.client.get_object(Bucket=self.bucket, Key=key)["Body"].read()

    def keys(self, prefix: str = "") -> List[str]:
        out: List[str] = []
        for page in self.client.get_paginator("list_objects_v2").paginate(Bucket=self.bucket, Prefix=prefix):
            out += [o["Key"] for o in page.get("Contents", [])]
        return sorted(out)

    def uploads(self) -> list:
        """Multipart uploads still open (an aborted write leaves none)."""
        return self.client.list_multipart_uploads(Bucket=self.bucket).get("Uploads", [])

    def put_tree(self, prefix: str, files: Dict[str, bytes]) -> str:
        for rel, data in files.items():
            self.put(prefix.rstrip("/") + "/" + rel, data)
        return self.url(prefix)


class RedisServer:
    """A redis-server with append-only persistence (fsync on every write) in a folder of its own."""

    def __init__(self, folder):
        self.folder = str(folder)
        self.port = free_port()
        self.proc = None

    def start(self):
        import redis

        exe = shutil.which("redis-server")
        if exe is None:
            pytest.fail("redis-server is not installed: the Redis index tests need it "
                        "(.ci/run installs it; on Debian/Ubuntu: apt-get install redis-server)")
        self.proc = subprocess.Popen(
            [exe, "--port", str(self.port), "--bind", "127.0.0.1", "--dir", self.folder, "--appendonly", "yes",
             "--appendfsync", "always", "--save", "", "--protected-mode", "no", "--daemonize", "no"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        client = redis.Redis(port=self.port)
        deadline = time.time() + 20
        while True:
            try:
                client.ping()
                break
            except redis.exceptions.ConnectionError:
                if time.time() > deadline or self.proc.poll() is not None:
                    pytest.fail(f"redis-server did not start on port {self.port}")
                time.sleep(0.05)
        # with AOF on, a restart replays the log: wait until loading is over
        while client.info("persistence").get("loading"):
            time.sleep(0.05)
        client.close()
        return self

    def kill(self):
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(timeout=20)

    def url(self, db=0):
        return f"redis://127.0.0.1:{self.port}/{db}"


# --------------------------------------------------------------------------- the suite's local Ray

SUITE_RAY = {"started": False}  # set by the ray_local fixture (tests/conftest.py) when it starts Ray


def stop_suite_ray() -> None:
    """Stops the local Ray instance the ray_local fixture started and keeps for the modules that
    follow, if it runs: for a module that needs no Ray connected in this process."""
    if SUITE_RAY["started"]:
        import ray
        ray.shutdown()
        SUITE_RAY["started"] = False


def write_dumps(folder):
    """Dump A (a.jsonl) and dump B (b.jsonl) in ``folder``: B holds copies of A's documents
    and of its own (the synthetic corpus of 2,400 documents of 80 words, seed 31, cut in two)."""
    import json
    from neardup.testing.synth import generate_corpus
    texts = generate_corpus(2400, seed=31, doc_words=80).texts
    (folder / "a.jsonl").write_text("".join(json.dumps({"text": t}) + "\n" for t in texts[:1200]))
    (folder / "b.jsonl").write_text("".join(json.dumps({"text": t}) + "\n" for t in texts[1200:]))
    return folder


def outputs(folder) -> dict:
    """Every output file's bytes (stats.json parsed, without "seconds")."""
    folder = Path(folder)
    out = {}
    for p in sorted(folder.rglob("*")):
        if p.is_file() and ".neardup-work" not in p.parts:
            rel = str(p.relative_to(folder))
            if rel == "stats.json":
                d = json.loads(p.read_text())
                d.pop("seconds")
                out[rel] = d
            else:
                out[rel] = p.read_bytes()
    return out
