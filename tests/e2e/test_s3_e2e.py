"""End to end through object storage: ``neardup dedup s3://BUCKET/in/ --output s3://BUCKET/out``
on moto's S3 server gives the output of the same run on local paths.

What "the same output" means: the kept/ files are compared byte for byte; the files that name
the inputs (stats.json, removed.parquet, clusters.parquet, texts_sample.parquet) are compared
after the input prefix ``s3://BUCKET/`` is removed from every string (a document's default id is
``NAME:ROW`` and NAME is the input as typed), stats.json without its "seconds"; report.html is
compared the same way, with timings masked.
"""

from __future__ import annotations

import gzip
import io
import json
import os
import re
import subprocess

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import zstandard

from helpers import child_env, free_port, neardup_command, run_in_process, run_process, s3_env

pytestmark = pytest.mark.slow  # whole runs through the S3 server (the ones killed or without an extra in fresh processes)


def _corpus() -> dict:
    base = [f"the quick brown fox number {i} jumps over the lazy dog and runs far away into the woods"
            for i in range(40)]
    docs = []
    for i, t in enumerate(base):
        docs.append({"id": f"d{i}", "text": t})
        if i % 3 == 0:
            docs.append({"id": f"d{i}-copy", "text": t + " today"})
    lines = "".join(json.dumps(d) + "\n" for d in docs).encode()
    half = len(docs) // 2
    first = "".join(json.dumps(d) + "\n" for d in docs[:half]).encode()
    second = "".join(json.dumps(d) + "\n" for d in docs[half:]).encode()
    buf = io.BytesIO()
    pq.write_table(pa.Table.from_pylist(docs[::2]), buf)
    return {
        "a.jsonl": first,
        "sub/b.jsonl.gz": gzip.compress(second, mtime=0),
        "sub/c.jsonl.zst": zstandard.ZstdCompressor(level=3).compress(lines[: len(lines) // 3].rsplit(b"\n", 2)[0] + b"\n"),
        "p/d.parquet": buf.getvalue(),
        "notes/e.txt": base[5].encode(),
    }


def _run(args, env, cwd):
    """A whole run in this process (what it writes is the test, not the process), in the
    environment ``env`` (the s3 fixture's, as a fresh process would get it)."""
    with pytest.MonkeyPatch.context() as mp:
        for k, v in env.items():
            if os.environ.get(k) != v:
                mp.setenv(k, v)
        r = run_in_process("dedup", *args, "--quiet", cwd=cwd)
    assert r.returncode == 0, r.stderr[-3000:]


def _local_tree(root: str) -> dict:
    out = {}
    for dirpath, _, files in os.walk(root):
        for f in files:
            p = os.path.join(dirpath, f)
            rel = os.path.relpath(p, root).replace(os.sep, "/")
            with open(p, "rb") as fh:
                out[rel] = fh.read()
    return out


def _strip(value, prefix: str):
    if isinstance(value, str):
        return value.replace(prefix, "")
    if isinstance(value, list):
        return [_strip(v, prefix) for v in value]
    if isinstance(value, dict):
        return {k: _strip(v, prefix) for k, v in value.items() if k != "seconds"}
    return value


def _parquet_rows(data: bytes, prefix: str):
    table = pq.read_table(io.BytesIO(data))
    return table.schema.names, _strip(table.to_pylist(), prefix)


def _mask_times(html: str, prefix: str) -> str:
    return re.sub(r"\d+(\.\d+)?\s*(s|ms|seconds)\b", "T", html.replace(prefix, ""))


@pytest.mark.parametrize("extra", [[], ["--id-column", "id", "--on-error", "skip"]], ids=["default-ids", "id-column"])
def test_dedup_s3_to_s3_same_output_as_local(s3, tmp_path, extra):
    files = _corpus()
    for rel, data in files.items():
        p = tmp_path / "in" / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(data)
    s3.put_tree("in", files)
    env = dict(os.environ, **s3_env(s3.endpoint))

    _run(["in/", "--output", "out", *extra], env, cwd=tmp_path)
    _run([s3.url("in/"), "--output", s3.url("out"), *extra], env, cwd=tmp_path)

    local = _local_tree(str(tmp_path / "out"))
    remote = {k[len("out/"):]: s3.get(k) for k in s3.keys("out/")}
    _same_output(remote, local, s3.url("") + "/")


def test_dedup_s3_input_local_output(s3, tmp_path):
    """Inputs on S3, output and work dir local."""
    files = _corpus()
    for rel, data in files.items():
        p = tmp_path / "in" / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(data)
    s3.put_tree("in", files)
    env = dict(os.environ, **s3_env(s3.endpoint))
    _run(["in/", "--output", "out-local"], env, cwd=tmp_path)
    _run([s3.url("in/"), "--output", "out-s3in"], env, cwd=tmp_path)
    _same_output(_local_tree(str(tmp_path / "out-s3in")), _local_tree(str(tmp_path / "out-local")),
                 s3.url("") + "/")


def _same_output(remote: dict, local: dict, prefix: str) -> None:
    # the folders' ownership marker names the run (its inputs' paths differ) and a store has no lock file
    remote = {k: v for k, v in remote.items() if not k.startswith(".neardup")}
    local = {k: v for k, v in local.items() if not k.startswith(".neardup")}
    assert sorted(remote) == sorted(local)
    assert not any(".neardup-work" in k or k.endswith(".tmp") for k in remote)
    for rel, want in local.items():
        got = remote[rel]
        if rel.startswith("kept/"):
            assert got == want, rel
        elif rel.endswith(".json"):
            assert _strip(json.loads(got), prefix) == _strip(json.loads(want), prefix), rel
        elif rel.endswith(".parquet"):
            assert _parquet_rows(got, prefix) == _parquet_rows(want, prefix), rel
        elif rel.endswith(".html"):
            assert _mask_times(got.decode(), prefix) == _mask_times(want.decode(), prefix), rel
        else:
            assert got == want, rel


def test_resume_after_kill_through_s3(s3, tmp_path):
    """Inputs and output on S3, the local engine's default work dir (a local folder named after
    the output URL): killed once the read stage is done, then resumed, gives the bytes of an
    uninterrupted run."""
    import signal
    import time

    from neardup.run import default_work_dir
    from neardup.io.storage.folder import Folder
    from neardup.testing.synth import generate_corpus, write_jsonl

    c = generate_corpus(6000, seed=5)
    write_jsonl(tmp_path / "big.jsonl", c[0] if isinstance(c, tuple) else c.texts)
    s3.put("in/big.jsonl", (tmp_path / "big.jsonl").read_bytes())
    env = child_env(dict(os.environ, **s3_env(s3.endpoint), PYTHONUNBUFFERED="1"))
    _run([s3.url("in/"), "--output", s3.url("ref")], env, cwd=tmp_path)
    out = s3.url("out")
    cmd = neardup_command("dedup", s3.url("in/"), "--output", out, "--quiet", "--batch-size", "500")
    state = os.path.join(default_work_dir(Folder.of(out), "local"), "state.json")
    proc = subprocess.Popen(cmd, env=env, cwd=tmp_path)
    killed_after = None
    deadline = time.time() + 120
    while time.time() < deadline and proc.poll() is None:
        try:
            with open(state) as f:
                done = json.load(f).get("done", {})
        except (OSError, ValueError):
            done = {}
        if "read" in done:
            proc.send_signal(signal.SIGKILL)
            killed_after = sorted(done)
            break
        time.sleep(0.01)
    proc.wait()
    assert killed_after is not None, "the run ended before it could be killed"
    assert "out/stats.json" not in s3.keys("out/"), "a killed run must not look complete"
    _run([s3.url("in/"), "--output", out, "--resume"], env, cwd=tmp_path)
    assert not os.path.exists(state), "the default work dir is removed after success"
    ref = {k[len("ref/"):]: s3.get(k) for k in s3.keys("ref/")}
    got = {k[len("out/"):]: s3.get(k) for k in s3.keys("out/")}
    _same_output(got, ref, "")


# --------------------------------------------------------------------------- errors, on the output side


def _one_line_exit_2(r, startswith: str) -> str:
    assert r.returncode == 2, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in r.stderr, r.stderr
    assert lines[0].startswith("neardup: error: " + startswith), lines[0]
    return lines[0]


def test_an_output_url_with_an_empty_path_segment_is_refused(s3, tmp_path):
    """s3://bucket//out: the store lists nothing under such a prefix, so the run (exit 0) moved
    none of its result in from .neardup-staging but wrote stats.json beside it (a "whole" result
    of one file), and could not have seen a foreign object there. One line, exit 2, nothing written."""
    (tmp_path / "in.jsonl").write_bytes(_corpus()["a.jsonl"])
    for url in (f"s3://{s3.bucket}//out", s3.url("a//out")):
        _one_line_exit_2(run_in_process("dedup", "in.jsonl", "--output", url, "--quiet", cwd=tmp_path),
                         f"output folder {url}: a URL with an empty path segment")
    assert s3.keys() == []


def test_output_store_errors_one_line_nothing_written(s3, tmp_path):
    """A local input and an s3:// --output (or --work-dir) that cannot be used: one line, exit 2,
    nothing written anywhere, before any work."""
    (tmp_path / "in.jsonl").write_bytes(_corpus()["a.jsonl"])
    env = dict(os.environ, **s3_env(s3.endpoint))
    out = s3.url("out")
    args = ["dedup", "in.jsonl", "--output", out, "--quiet"]
    line = _one_line_exit_2(run_process(*args, env=env, cwd=tmp_path, block=("s3fs",)),
                            f"{out}: reading and writing s3:// paths needs s3fs")
    assert "pip install 'neardup[cloud]'" in line
    _one_line_exit_2(run_process(*args, env=env, cwd=tmp_path, block=("fsspec",)),
                     f"{out}: reading and writing s3:// paths needs the cloud extra")
    # (in this process where the environment is this one: the s3 fixture's; the exit status of a
    # process is the cases' above and below)
    _one_line_exit_2(run_in_process("dedup", "in.jsonl", "--output", "s3://no-such-bucket-here/out", "--quiet",
                                    cwd=tmp_path),
                     "s3://no-such-bucket-here/out: no such bucket: no-such-bucket-here")
    port = free_port()
    unreachable = dict(env, AWS_ENDPOINT_URL=f"http://127.0.0.1:{port}", AWS_MAX_ATTEMPTS="1")
    _one_line_exit_2(run_process(*args, env=unreachable, cwd=tmp_path),
                     f"{out}: cannot reach the storage endpoint at http://127.0.0.1:{port}")
    no_creds = {k: v for k, v in env.items() if k not in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_PROFILE")}
    no_creds.update(AWS_SHARED_CREDENTIALS_FILE=str(tmp_path / "none"), AWS_CONFIG_FILE=str(tmp_path / "none"),
                    AWS_EC2_METADATA_DISABLED="true")
    _one_line_exit_2(run_process(*args, env=no_creds, cwd=tmp_path), f"{out}: no credentials found (")
    # the local engine keeps its work dir on local disk
    _one_line_exit_2(run_in_process("dedup", "in.jsonl", "--output", "out", "--work-dir", s3.url("work"), "--quiet",
                                    cwd=tmp_path),
                     f"--work-dir {s3.url('work')}: the local engine keeps its work dir on local disk")
    assert s3.keys() == []
    assert sorted(os.listdir(tmp_path)) == ["in.jsonl", "none"] or sorted(os.listdir(tmp_path)) == ["in.jsonl"]
