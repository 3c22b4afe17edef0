"""neardup.io.storage.fs without a server: local paths through plain os calls, and a generic fsspec
protocol (``memory://``) through the same functions as s3:// (see test_io_s3.py for S3)."""

from __future__ import annotations

import gzip
import os

import pytest
import zstandard

from neardup.errors import ConfigError
from neardup.io import discover, read_source, write_kept
from neardup.io.storage import fs, paths, remote


@pytest.mark.parametrize("path,url,proto", [
    ("s3://bucket/key", True, "s3"), ("gs://b/k", True, "gs"), ("hf://datasets/o/n", True, "hf"),
    ("simplecache::s3://b/k", True, "simplecache::s3"), ("memory://x", True, "memory"),
    ("file:///tmp/x", False, "file"), ("C://x", False, "file"), ("a/b.jsonl", False, "file"),
    ("/abs/a.jsonl", False, "file"), ("weird:name.txt", False, "file"),
])
def test_is_url(path, url, proto):
    assert paths.is_url(path) is url and fs.protocol(path) == proto


def test_path_helpers():
    assert fs.join("s3://b/in", "a", "b.txt") == "s3://b/in/a/b.txt"
    assert fs.join("s3://b/in/", "a") == "s3://b/in/a"
    assert fs.join("in", "a") == os.path.join("in", "a")
    assert fs.basename("s3://b/in/a.jsonl") == "a.jsonl" and fs.basename("in/a.jsonl") == "a.jsonl"
    assert fs.dirname("s3://b/in/a.jsonl") == "s3://b/in" and fs.dirname("s3://b") == "s3://b"
    assert fs.dirname("in/a.jsonl") == "in"


def test_local_functions(tmp_path):
    d = tmp_path / "d"
    fs.makedirs(str(d / "e"))
    fs.write_bytes(str(d / "e" / "f.txt"), b"abc")
    assert fs.exists(str(d)) and fs.isdir(str(d)) and fs.isfile(str(d / "e" / "f.txt"))
    assert fs.listdir(str(d)) == [("e", True)]
    assert fs.walk_files(str(d)) == [(("e", "f.txt"), str(d / "e" / "f.txt"))]
    assert fs.glob(str(d / "*" / "*.txt")) == [str(d / "e" / "f.txt")]
    st = os.stat(d / "e" / "f.txt")
    assert fs.info(str(d / "e" / "f.txt")) == fs.FileInfo(3, st.st_mtime_ns)
    assert fs.read_bytes("file://" + str(d / "e" / "f.txt")) == b"abc"
    fs.remove_tree(str(d))
    assert not d.exists()
    fs.remove_tree(str(d))  # nothing there: nothing to do


def test_local_atomic_write(tmp_path):
    out = tmp_path / "sub" / "o.bin"
    with pytest.raises(RuntimeError):
        with fs.atomic_write(str(out)) as f:
            f.write(b"half")
            raise RuntimeError("failed")
    assert os.listdir(tmp_path / "sub") == []
    (tmp_path / "sub" / "o.bin.tmp").write_bytes(b"a user's file of the old temporary name")
    with fs.atomic_write(str(out)) as f:
        f.write(b"whole")
        temps = [n for n in os.listdir(tmp_path / "sub") if n.startswith(".o.bin.") and n.endswith(".tmp")]
        assert not out.exists() and len(temps) == 1  # a new name of its own, made with O_EXCL
    assert out.read_bytes() == b"whole" and sorted(os.listdir(tmp_path / "sub")) == ["o.bin", "o.bin.tmp"]
    assert (tmp_path / "sub" / "o.bin.tmp").read_bytes() == b"a user's file of the old temporary name"


@pytest.mark.parametrize("comp", ["gzip", "zstd"])
def test_open_read_decompresses(tmp_path, comp):
    data = b"line\n" * 1000
    raw = gzip.compress(data) if comp == "gzip" else zstandard.ZstdCompressor().compress(data)
    (tmp_path / "a").write_bytes(raw)
    with fs.open_read(str(tmp_path / "a"), comp) as f:
        assert f.read() == data
    (tmp_path / "b").write_bytes(raw[: len(raw) // 2])
    with pytest.raises(OSError, match="Truncated compressed stream"):
        with fs.open_read(str(tmp_path / "b"), comp) as f:
            f.read()


def test_any_fsspec_protocol():
    """memory:// stands for every fsspec filesystem that is not an object store."""
    base = "memory://neardup-test-io-fs"
    fs.remove_tree(base)
    fs.write_bytes(base + "/in/a.jsonl", b'{"text": "one"}\n{"text": "two"}\n')
    fs.write_bytes(base + "/in/sub/b.txt", b"three")
    fs.write_bytes(base + "/in/.hidden.txt", b"no")
    srcs = discover([base + "/in"])
    assert [(s.name, s.relpath, s.format) for s in srcs] == [
        (base + "/in/a.jsonl", "a.jsonl", "jsonl"), (base + "/in/sub/b.txt", "sub/b.txt", "text")]
    texts = [t for s in srcs for b in read_source(s) for t in b.text.to_pylist()]
    assert texts == ["one", "two", "three"]
    assert write_kept(srcs[0], [1], base + "/out/a.jsonl") == 1
    assert fs.read_bytes(base + "/out/a.jsonl") == b'{"text": "two"}\n'
    assert [s.relpath for s in discover([base + "/in/**/*.txt"])] == ["sub/b.txt"]
    fs.remove_tree(base)


def test_a_filesystem_per_host_and_settings_and_a_bounded_number_of_them(monkeypatch):
    """A URL's own options (the host of sftp://, ftp://, webhdfs://) make another filesystem, and so
    does a changed setting of the environment; only the last few are kept."""
    fsspec = pytest.importorskip("fsspec")
    from urllib.parse import urlsplit

    class HostFS(fsspec.AbstractFileSystem):
        protocol = "neardup-test-host"

        def __init__(self, host=None, **kwargs):
            super().__init__(**kwargs)
            self.host = host

        @staticmethod
        def _get_kwargs_from_urls(path):
            return {"host": urlsplit(path).hostname}

    fsspec.register_implementation("neardup-test-host", HostFS, clobber=True)
    a, path = remote.filesystem("neardup-test-host://a/x/y.jsonl")
    b, _ = remote.filesystem("neardup-test-host://b/x/y.jsonl")
    assert (a.host, b.host, path) == ("a", "b", "a/x/y.jsonl")
    assert remote.filesystem("neardup-test-host://a/z")[0] is a
    monkeypatch.setenv("AWS_PROFILE", "another")
    assert remote.filesystem("neardup-test-host://a/z")[0] is not a
    for i in range(2 * remote.FS_CACHE_SIZE):
        remote.filesystem(f"neardup-test-host://h{i}/x")
    assert len(remote.FS_CACHE) == remote.FS_CACHE_SIZE


def test_unknown_protocol_is_one_line():
    with pytest.raises(ConfigError) as ei:
        fs.exists("nosuchproto://x/y")
    assert str(ei.value).startswith("nosuchproto://x/y: unknown protocol nosuchproto://")


@pytest.mark.parametrize("where", ["local", "memory"])
def test_tables_round_trip(tmp_path, where):
    import pyarrow as pa

    from neardup.io.storage import tables

    base = str(tmp_path) if where == "local" else "memory://neardup-test-tables"
    t = pa.table({"a": list(range(1000)), "b": [str(i) for i in range(1000)]})
    tables.write_arrow(t, fs.join(base, "w", "x.arrow"), max_chunksize=100)
    tables.write_parquet(t, fs.join(base, "w", "x.parquet"))
    assert tables.read_table(fs.join(base, "w", "x.arrow")).equals(t)
    assert tables.read_table(fs.join(base, "w", "x.arrow"), ["b"]).equals(t.select(["b"]))
    assert tables.read_table(fs.join(base, "w", "x.parquet"), ["a"]).equals(t.select(["a"]))
    assert tables.parquet_file(fs.join(base, "w", "x.parquet")).metadata.num_row_groups == 1
    assert sorted(n for n, _ in fs.listdir(fs.join(base, "w"))) == ["x.arrow", "x.parquet"]
    fs.remove_tree(fs.join(base, "w"))


def test_missing_package_names_it():
    import fsspec  # noqa: F401
    try:
        import gcsfs  # noqa: F401
    except ImportError:
        pass
    else:  # the cloud extra's gcsfs is not one of the test extras: CI does not install it
        pytest.skip("gcsfs is installed here")
    with pytest.raises(ConfigError) as ei:
        discover(["gs://some-bucket/in/"])
    assert str(ei.value) == ("gs://some-bucket/in/: reading and writing gs:// paths needs gcsfs "
                             "(pip install 'neardup[cloud]')")


def test_file_urls_are_local_paths(tmp_path):
    (tmp_path / "a.jsonl").write_bytes(b'{"text": "x"}\n')
    (src,) = discover(["file://" + str(tmp_path)])
    assert src.path == str(tmp_path / "a.jsonl") and src.relpath == "a.jsonl"


def test_local_and_remote_files_offer_the_same_operations():
    """The storage room's one contract (fs.Files): both kinds of files offer every operation with
    the same parameters, so that fs and Folder never ask which one they hold."""
    import inspect

    from neardup.io.storage.local import LocalFiles
    from neardup.io.storage.remote import RemoteFiles

    ops = [name for name, v in vars(fs.Files).items() if callable(v) and not name.startswith("_")]
    assert len(ops) >= 18
    for name in ops:
        want = list(inspect.signature(getattr(fs.Files, name)).parameters)
        for cls in (LocalFiles, RemoteFiles):
            assert list(inspect.signature(getattr(cls, name)).parameters) == want, (cls.__name__, name)
    assert fs.files_of("s3://b/k").is_remote and not fs.files_of("/tmp/x").is_remote
    assert not fs.files_of("file:///tmp/x").is_remote
