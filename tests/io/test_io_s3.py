"""neardup.io through s3:// on a real S3 API (moto's server on the loopback interface): listing,
globbing, every format, the bad-input messages and write_kept behave as for local files; a
missing extra, an unreachable endpoint, missing credentials and a missing bucket are one line
each. Independent of the engines."""

from __future__ import annotations

import gzip
import io
import json
import os
import subprocess
import sys

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import zstandard

from neardup.errors import ConfigError, InputError
from neardup.io import discover, read_source, write_kept
from neardup.io.storage import fs
import io_inputs
from helpers import SRC, fail_message, free_port, jsonl, run_in_process, run_process

pytestmark = pytest.mark.slow  # the S3 server, and processes started without an extra


# --------------------------------------------------------------------------- helpers


def parquet_bytes(table: pa.Table, **kw) -> bytes:
    buf = io.BytesIO()
    pq.write_table(table, buf, **kw)
    return buf.getvalue()


RECORDS = [{"id": f"d{i}", "text": f"document {i} " + "word " * (i % 7), "q": i / 10} for i in range(300)]
PLAIN = jsonl(RECORDS)


def corpus() -> dict:
    """A small tree of every format, hidden entries and a __pycache__ folder included."""
    return {
        "a/x.jsonl": PLAIN,
        "a/y.jsonl.gz": gzip.compress(PLAIN, mtime=0),
        "a/z.jsonl.zst": zstandard.ZstdCompressor(level=3).compress(PLAIN),
        "a/.hidden.jsonl": PLAIN,
        "b/t.parquet": parquet_bytes(pa.Table.from_pylist(RECORDS), row_group_size=64),
        "b/notes/one.txt": b"the first note",
        "b/notes/two.md": "the second note, \u00e9".encode(),
        "b/__pycache__/m.txt": b"compiled",
        "c/.git/config": b"[core]",
        "top.json": jsonl(RECORDS[:5]),
    }


def put_local(root, files: dict) -> None:
    for rel, data in files.items():
        p = os.path.join(root, rel)
        os.makedirs(os.path.dirname(p), exist_ok=True)
        with open(p, "wb") as f:
            f.write(data)


@pytest.fixture
def both(s3, tmp_path, monkeypatch):
    """The same tree at ./in (cwd = tmp_path) and at s3://BUCKET/in; returns (s3, url_prefix)."""
    monkeypatch.chdir(tmp_path)
    put_local("in", corpus())
    s3.put_tree("in", corpus())
    return s3, s3.url("") + "/"


def local_name(name: str, prefix: str) -> str:
    return name[len(prefix):] if name.startswith(prefix) else name


def describe(sources, prefix=""):
    return [(local_name(s.name, prefix), s.relpath, s.format, s.compression) for s in sources]


def read_all(src, **kw):
    """A whole source as a dict: text, rows, ids, scores, rejected."""
    return dict(zip(("text", "rows", "ids", "scores", "rejected"), io_inputs.read_all(src, **kw)))


# --------------------------------------------------------------------------- the layer itself


def test_fs_layer_basics(s3):
    url = s3.put("d/e/f.txt", b"abc")
    assert fs.os_path(url) is None and fs.os_path("d/e/f.txt") == "d/e/f.txt" and fs.os_path("file:///tmp/x") == "/tmp/x"
    assert fs.exists(url) and fs.isfile(url) and not fs.isdir(url)
    assert fs.isdir(s3.url("d")) and fs.isdir(s3.url("d/e/"))
    assert not fs.exists(s3.url("nope"))
    assert fs.listdir(s3.url("d")) == [("e", True)]
    assert fs.walk_files(s3.url("d")) == [(("e", "f.txt"), url)]
    assert fs.glob(s3.url("d/*/*.txt")) == [url]
    assert fs.info(url).size == 3 and fs.info(url).mtime_ns > 0
    assert fs.read_bytes(url) == b"abc"
    assert fs.join(s3.url("d"), "e", "f.txt") == url
    assert fs.basename(url) == "f.txt" and fs.dirname(url) == s3.url("d/e")
    fs.write_bytes(s3.url("w/x.bin"), b"123")
    assert s3.get("w/x.bin") == b"123"
    fs.makedirs(s3.url("no/such/folder"))  # a no-op on an object store
    fs.remove_tree(s3.url("d"))
    assert not fs.exists(url) and s3.keys("d/") == []
    with fs.open_read(s3.put("g.gz", gzip.compress(b"zipped"))[:], "gzip") as f:
        assert f.read() == b"zipped"


def test_atomic_write_failure_leaves_nothing(s3):
    url = s3.url("out/big.bin")
    with pytest.raises(RuntimeError):
        with fs.atomic_write(url) as f:
            f.write(os.urandom(6 << 20))  # more than a part: a multipart upload has started
            f.write(os.urandom(6 << 20))
            raise RuntimeError("the writer failed")
    assert s3.keys("out/") == [] and s3.uploads() == []
    with fs.atomic_write(url) as f:
        f.write(b"x" * (7 << 20))
        assert s3.keys("out/") == []  # not visible before the upload completes
    assert s3.keys("out/") == ["out/big.bin"] and len(s3.get("out/big.bin")) == 7 << 20


# --------------------------------------------------------------------------- discovery


@pytest.mark.parametrize("inputs", [
    ["in"],
    ["in/a", "in/top.json"],
    ["in/a/*.jsonl*"],
    ["in/*"],
    ["in/**/*.txt"],
    ["in/b/**"],
    ["in/b/notes/one.txt", "in/a/x.jsonl"],
])
def test_discover_same_as_local(both, inputs):
    s3h, prefix = both
    local = discover(inputs)
    remote = discover([prefix + i for i in inputs])
    assert describe(remote, prefix) == describe(local)
    assert all(s.path.startswith(prefix) for s in remote)


def test_discover_errors_same_as_local(both):
    s3h, prefix = both
    for inp in ["in/missing.jsonl", "in/*.nothing", "in/a/x.jsonl|in/a/x.jsonl", "in/a|in/a/x.jsonl"]:
        parts = inp.split("|")
        with pytest.raises(InputError) as lo:
            discover(parts)
        with pytest.raises(InputError) as re_:
            discover([prefix + p for p in parts])
        assert str(re_.value).replace(prefix, "") == str(lo.value)


# --------------------------------------------------------------------------- reading


@pytest.mark.parametrize("rel", ["a/x.jsonl", "a/y.jsonl.gz", "a/z.jsonl.zst", "b/t.parquet",
                                 "b/notes/two.md"])
def test_read_every_format_same_as_local(both, rel):
    s3h, prefix = both
    (lsrc,) = discover(["in/" + rel])
    (rsrc,) = discover([prefix + "in/" + rel])
    kw = {} if rel.endswith(".md") else {"id_column": "id", "score_column": "q"}
    want = read_all(lsrc, batch_size=100, **kw)
    got = read_all(rsrc, batch_size=100, **kw)
    if rel.endswith(".md"):
        assert got["text"] == want["text"] == ["the second note, \u00e9"]
    else:
        assert got == want and len(got["rows"]) == len(RECORDS)


def test_read_text_folder(both):
    s3h, prefix = both
    local = [read_all(s)["text"] for s in discover(["in/b/notes"])]
    remote = [read_all(s)["text"] for s in discover([prefix + "in/b/notes"])]
    assert remote == local == [["the first note"], ["the second note, \u00e9"]]


def _bad_files() -> dict:
    lines = [json.dumps({"text": os.urandom(40).hex(), "i": i}).encode() for i in range(3000)]
    full = b"\n".join(lines) + b"\n"
    gz, zs = gzip.compress(full, mtime=0), zstandard.ZstdCompressor().compress(full)
    good = parquet_bytes(pa.table({"text": ["a", "b"]}))
    return {
        "broken.jsonl": b'{"text": "a"}\n\n{"text": broken\n',
        "notext.jsonl": b'{"text": "a"}\n{"body": "b"}\n',
        "badutf8.jsonl": b'{"text": "a"}\n{"text": "\xff"}\n',
        "cut.jsonl.gz": gz[: len(gz) * 2 // 3],
        "cut.jsonl.zst": zs[: len(zs) // 2],
        "plain.jsonl.gz": b'{"text": "plain"}\n',
        "garbage.jsonl.gz": gz + b"garbage",
        "array.json": b'[{"text": "a"}]\n',
        "junk.parquet": b"PAR1 this is no parquet",
        "cut.parquet": good[: len(good) // 2],
        "ints.parquet": parquet_bytes(pa.table({"text": [1, 2]})),
        "bad.txt": b"ok \xff\xfe",
        "zipped.txt": gzip.compress(b"text " * 50)[:20],  # a gzip text file cut short
    }


def test_an_empty_jsonl_part_on_s3_is_zero_records_with_a_note_as_on_disk(s3, tmp_path, monkeypatch):
    """Spark writes empty part files: no error, a note (Batch.skipped), the same as a local file."""
    monkeypatch.chdir(tmp_path)
    put_local("bad", {"empty.jsonl": b""})
    s3.put("bad/empty.jsonl", b"")
    (lsrc,) = discover(["bad/empty.jsonl"])
    (rsrc,) = discover([s3.url("") + "/bad/empty.jsonl"])
    got = [[(len(b), b.skipped) for b in read_source(src)] for src in (lsrc, rsrc)]
    assert got[0] == got[1] == [(0, "empty file (no records)")]


@pytest.mark.parametrize("name", sorted(_bad_files()))
def test_bad_input_same_messages(s3, tmp_path, monkeypatch, name):
    monkeypatch.chdir(tmp_path)
    data = _bad_files()[name]
    put_local("bad", {name: data})
    s3.put("bad/" + name, data)
    prefix = s3.url("") + "/"
    (lsrc,) = discover(["bad/" + name])
    (rsrc,) = discover([prefix + "bad/" + name])
    want = fail_message(lsrc)
    assert fail_message(rsrc).replace(prefix, "") == want
    assert want.startswith(f"bad/{name}")
    w, g = read_all(lsrc, on_error="skip"), read_all(rsrc, on_error="skip")
    assert g["rows"] == w["rows"] and g["text"] == w["text"] and g["rejected"] == w["rejected"]


def test_missing_object_after_discovery(s3):
    url = s3.put("gone/a.jsonl", PLAIN)
    (src,) = discover([url])
    s3.client.delete_object(Bucket=s3.bucket, Key="gone/a.jsonl")
    assert fail_message(src) == f"{url}: cannot read file (No such file or directory)"


# --------------------------------------------------------------------------- writing


@pytest.mark.parametrize("rel", ["a/x.jsonl", "a/y.jsonl.gz", "a/z.jsonl.zst", "b/t.parquet",
                                 "b/notes/one.txt"])
@pytest.mark.parametrize("output_format", ["same", "jsonl", "parquet"])
def test_write_kept_same_bytes_as_local(both, rel, output_format):
    s3h, prefix = both
    (lsrc,) = discover(["in/" + rel])
    (rsrc,) = discover([prefix + "in/" + rel])
    keep = [0] if rel.endswith(".txt") else np.arange(0, len(RECORDS), 3)
    n_local = write_kept(lsrc, keep, "out/" + rel, output_format=output_format)
    n_remote = write_kept(rsrc, keep, prefix + "out/" + rel, output_format=output_format)
    assert n_remote == n_local == len(keep)
    with open("out/" + rel, "rb") as f:
        want = f.read()
    got = s3h.get("out/" + rel)
    # a text file's id is its path below the inputs' folder (one.txt), never the URL: the same bytes
    if output_format == "parquet" and rel.endswith(".txt"):
        wt, gt = pq.read_table(io.BytesIO(want)), pq.read_table(io.BytesIO(got))
        assert gt.column("text") == wt.column("text")
        assert gt.column("id").to_pylist() == wt.column("id").to_pylist() == ["one.txt"]
        return
    assert got == want
    assert not os.path.exists("out/" + rel + ".tmp")


def test_write_kept_failure_leaves_no_object(both):
    s3h, prefix = both
    (src,) = discover([prefix + "in/a/x.jsonl"])
    with pytest.raises(ValueError, match="has 300 lines"):
        write_kept(src, [0, 1, 2, 5000], prefix + "out/x.jsonl")  # fails after writing
    assert s3h.keys("out/") == [] and s3h.uploads() == []
    (src,) = discover([prefix + "in/b/t.parquet"])
    with pytest.raises(ValueError):
        write_kept(src, [0, 1, 5000], prefix + "out/t.parquet")
    assert s3h.keys("out/") == []


def test_write_kept_to_missing_bucket(both):
    s3h, prefix = both
    (src,) = discover([prefix + "in/a/x.jsonl"])
    with pytest.raises(InputError) as ei:
        write_kept(src, [0, 1], "s3://no-such-bucket-here/out/x.jsonl")
    assert str(ei.value) == "s3://no-such-bucket-here/out/x.jsonl: no such bucket: no-such-bucket-here"


# --------------------------------------------------------------------------- one line each


def test_missing_bucket(s3):
    with pytest.raises(InputError) as ei:
        discover(["s3://no-such-bucket-here/in/"])
    assert str(ei.value) == "s3://no-such-bucket-here/in/: no such bucket: no-such-bucket-here"


def test_unreachable_endpoint(s3, monkeypatch):
    port = free_port()
    monkeypatch.setenv("AWS_ENDPOINT_URL", f"http://127.0.0.1:{port}")
    monkeypatch.setenv("AWS_MAX_ATTEMPTS", "1")
    with pytest.raises(InputError) as ei:
        discover([s3.url("in/")])
    assert str(ei.value) == (f"{s3.url('in/')}: cannot reach the storage endpoint at "
                             f"http://127.0.0.1:{port}")


def _no_credentials(monkeypatch, tmp_path):
    for k in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"):
        monkeypatch.delenv(k, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-credentials"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-config"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")


def test_missing_credentials(s3, monkeypatch, tmp_path):
    url = s3.put("in/a.jsonl", PLAIN)
    _no_credentials(monkeypatch, tmp_path)
    with pytest.raises(InputError) as ei:
        discover([url])
    assert str(ei.value).startswith(f"{url}: no credentials found (")


def test_unknown_protocol():
    with pytest.raises(ConfigError, match="unknown protocol nosuchproto://"):
        discover(["nosuchproto://bucket/x.jsonl"])


def test_local_paths_do_not_import_fsspec(tmp_path):
    (tmp_path / "a.jsonl").write_bytes(PLAIN)
    code = ("import sys; sys.modules['fsspec'] = None\n"
            "from neardup.io import discover, read_source, write_kept\n"
            f"(s,) = discover([{str(tmp_path / 'a.jsonl')!r}])\n"
            "n = sum(len(b) for b in read_source(s))\n"
            f"write_kept(s, [0], {str(tmp_path / 'o.jsonl')!r}); print(n)\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       env=dict(os.environ, PYTHONPATH=SRC))
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "300"


# --------------------------------------------------------------------------- the command line


def _one_line_exit_2(r, startswith):
    assert r.returncode == 2, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in r.stderr, r.stderr
    assert lines[0].startswith("neardup: error: " + startswith), lines[0]
    return lines[0]


@pytest.mark.parametrize("block,what", [(["s3fs"], "s3fs"), (["fsspec"], "the cloud extra")])
def test_cli_without_the_extra(s3, tmp_path, block, what):
    url = s3.put("in/a.jsonl", PLAIN)
    out = tmp_path / "out"
    r = run_process("dedup", url, "--output", out, block=block)
    line = _one_line_exit_2(r, f"{url}: reading and writing s3:// paths needs {what}")
    assert "pip install 'neardup[cloud]'" in line
    assert not out.exists()


def test_cli_store_errors(s3, tmp_path, monkeypatch):
    s3.put("in/a.jsonl", PLAIN)
    out = tmp_path / "out"
    args = ["dedup", s3.url("in/"), "--output", str(out)]
    _one_line_exit_2(run_in_process("dedup", "s3://no-such-bucket-here/in/", "--output", str(out)),
                     "s3://no-such-bucket-here/in/: no such bucket: no-such-bucket-here")
    _one_line_exit_2(run_in_process("dedup", s3.url("nothing/"), "--output", str(out)),
                     f"no such file or folder: {s3.url('nothing/')}")
    with monkeypatch.context() as m:
        port = free_port()
        m.setenv("AWS_ENDPOINT_URL", f"http://127.0.0.1:{port}")
        m.setenv("AWS_MAX_ATTEMPTS", "1")
        _one_line_exit_2(run_in_process(*args), f"{s3.url('in/')}: cannot reach the storage endpoint at "
                                                f"http://127.0.0.1:{port}")
    with monkeypatch.context() as m:
        _no_credentials(m, tmp_path)
        _one_line_exit_2(run_in_process(*args), f"{s3.url('in/')}: no credentials found (")
    assert not out.exists()


def test_tables_on_s3(s3):
    from neardup.io.storage import tables

    t = pa.table({"a": list(range(5000)), "b": [str(i) for i in range(5000)]})
    tables.write_arrow(t, s3.url("work/read/x.arrow"), max_chunksize=1000)
    tables.write_parquet(t, s3.url("work/read/x.parquet"))
    assert s3.keys("work/") == ["work/read/x.arrow", "work/read/x.parquet"]
    assert tables.read_table(s3.url("work/read/x.arrow"), ["a"]).equals(t.select(["a"]))
    assert tables.read_table(s3.url("work/read/x.parquet")).equals(t)
    with pytest.raises(RuntimeError):
        with fs.atomic_write(s3.url("work/read/y.parquet")) as f:
            w = pq.ParquetWriter(f, t.schema)
            w.write_table(t)
            w.close()  # closes its sink: that must not complete the upload
            raise RuntimeError("the stage failed after its writer closed")
    assert s3.keys("work/") == ["work/read/x.arrow", "work/read/x.parquet"]
