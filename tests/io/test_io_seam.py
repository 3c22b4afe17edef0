"""The storage seam: what code outside ``neardup.io.storage`` asks of a folder, an output file or
the sources instead of asking whether a path is a URL (``Folder.require_folder``,
``Folder.local_view``, ``check_output_file(remote_ok=True)``, ``publish_file``, ``same_file``,
``estimate_documents``), each on a local path and on S3 (moto's server, the ``s3`` fixture of
tests/conftest.py), and the rule that keeps the question inside ``neardup.io.storage``."""

from __future__ import annotations

import gzip
import json
import os
import re
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import neardup
from neardup import io as nio
from neardup.errors import ConfigError, InputError
from neardup.io.storage import fs, remote
from neardup.io.storage.folder import Folder
from neardup.io.storage.outfile import check_output_file, publish_file, same_file
from neardup.io.sources import Source, estimate_documents



SRC = Path(neardup.__file__).parent

def test_no_is_url_outside_storage():
    """Whether a path is local or remote is decided inside the storage room (neardup.io.storage)
    alone: everything else holds a Folder or asks a question of capability (os_path)."""
    asking = sorted(path.relative_to(SRC).as_posix() for path in SRC.rglob("*.py")
                    if not path.relative_to(SRC).as_posix().startswith("io/storage/")
                    and re.search(r"\b(is_url|is_remote|any_remote)\b", path.read_text(encoding="utf-8")))
    assert asking == [], "hold a Folder or ask os_path (neardup.io.storage), not is_url"


@pytest.fixture
def no_store(monkeypatch):
    """Any request to a store fails the test."""
    def refuse(url):
        raise AssertionError(f"a request to {url}")
    monkeypatch.setattr(remote, "filesystem", refuse)


# --------------------------------------------------------------------------- Folder.require_folder


def test_require_folder(tmp_path, no_store):
    (tmp_path / "d").mkdir()
    (tmp_path / "f").write_text("x")
    Folder.of(tmp_path / "d").require_folder()
    Folder.of(f"file://{tmp_path}/d").require_folder()
    for bad in ("f", "missing"):
        with pytest.raises(InputError) as e:
            Folder.of(tmp_path / bad).require_folder()
        assert str(e.value) == f"{tmp_path / bad}: not a folder"
    Folder.of("s3://bucket/any/prefix").require_folder()  # a prefix always is one: nothing asked


# --------------------------------------------------------------------------- Folder.local_view


def test_local_view_of_a_local_folder_is_the_folder_as_named(tmp_path, monkeypatch, no_store):
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "a").write_text("x")
    monkeypatch.chdir(tmp_path)
    for given in ("d", f"file://{tmp_path}/d"):
        with Folder.of(given).local_view(["a", "b"], sizes_only=["kept"]) as local:
            assert local == fs.local_path(given)
            with pytest.raises(InputError, match=f"^{re.escape(local)}/b: x$"):  # errors pass unchanged
                raise InputError(f"{local}/b: x")
    assert sorted(os.listdir(tmp_path / "d")) == ["a"]  # nothing copied, nothing removed


@pytest.mark.slow  # a moto S3 server
def test_local_view_of_a_remote_folder_is_a_copy(s3, tmp_path):
    s3.put("out/stats.json", b'{"a": 1}')
    s3.put("out/removed.parquet", b"PAR1")
    s3.put("out/other.bin", b"not asked for")
    s3.put("out/kept/x.jsonl", b"1234567")
    s3.put("out/kept/sub/y.jsonl", b"")
    with Folder.of(s3.url("out") + "/").local_view(["stats.json", "removed.parquet", "clusters.parquet"],
                                                   sizes_only=["kept"]) as local:
        assert os.path.isdir(local) and fs.os_path(local) == local
        files = sorted(p.relative_to(local).as_posix() for p in Path(local).rglob("*") if p.is_file())
        assert files == ["kept/sub/y.jsonl", "kept/x.jsonl", "removed.parquet", "stats.json"]
        assert (Path(local) / "stats.json").read_bytes() == b'{"a": 1}'
        assert (Path(local) / "kept" / "x.jsonl").read_bytes() == b"\0" * 7  # the size, not the bytes
    assert not os.path.exists(local)  # removed on exit
    folder = Folder.of(s3.url("out"))
    with pytest.raises(InputError) as e:  # an error names the folder, never the copy
        with folder.local_view(["stats.json"]) as local:
            raise InputError(f"{local}/stats.json: bad; {local}: no")
    assert str(e.value) == f"{s3.url('out')}/stats.json: bad; {s3.url('out')}: no"
    with pytest.raises(ValueError) as e:  # a bug is left as it is
        with folder.local_view(["stats.json"]) as local:
            raise ValueError(local)
    assert str(e.value) == local
    with Folder.of(s3.url("nothing")).local_view(["stats.json"], sizes_only=["kept"]) as local:
        assert os.listdir(local) == []


def test_local_view_of_a_store_that_refuses_is_one_line(monkeypatch):
    def denied(self, url):
        raise PermissionError("AccessDenied")
    monkeypatch.setattr(remote.RemoteFiles, "read_bytes", denied)
    with pytest.raises(InputError) as e:
        with Folder.of("s3://KEY:SECRETZZ@bucket/out").local_view(["stats.json"]):
            pass
    assert str(e.value) == "s3://KEY:***@bucket/out: access denied (AccessDenied)"


# --------------------------------------------------------------------------- output files


def test_same_file(tmp_path, monkeypatch):
    (tmp_path / "a").write_text("x")
    os.symlink(tmp_path / "a", tmp_path / "link")
    assert same_file(tmp_path / "link", tmp_path / "." / "a")
    assert same_file("s3://b/x/r.html", "s3://b/x/r.html/") and not same_file("s3://b/x/r.html", "s3://b/y/r.html")
    # a URL is never a local path, whatever the local path's spelling
    monkeypatch.chdir(tmp_path)
    assert not same_file("s3://b/r.html", "s3:/b/r.html")


@pytest.mark.slow  # a moto S3 server
def test_check_output_file_on_a_store(s3):
    folder = s3.url("out")
    s3.put("out/stats.json", b"{}")
    s3.put("there.html", b"old")
    inputs = [f"{folder}/stats.json", "/local/stats.json"]
    with pytest.raises(ConfigError, match="this writes a local file; give a local path"):
        check_output_file(s3.url("new.html"))  # a command that writes local files only
    for target, needle in ((f"{folder}/stats.json", f"that is an input of this command ({folder}/stats.json)"),
                           (f"{folder}/kept", f"that is inside {folder}/kept, which this command reads"),
                           (f"{folder}/kept/x.html", f"that is inside {folder}/kept, which this command reads")):
        for overwrite in (False, True):
            with pytest.raises(ConfigError) as e:
                check_output_file(target, inputs=inputs, inside=[f"{folder}/kept", "/local"], overwrite=overwrite,
                                  option="-o", remote_ok=True)
            assert str(e.value) == f"-o {target}: {needle}; " + ("name another file" if "input" in needle
                                                                   else "name a file elsewhere")
    with pytest.raises(ConfigError, match=r"^-o s3://.*/there.html: it exists; give --overwrite"):
        check_output_file(s3.url("there.html"), inputs=inputs, option="-o", remote_ok=True)
    check_output_file(s3.url("there.html"), inputs=inputs, overwrite=True, option="-o", remote_ok=True)
    check_output_file(s3.url("new.html"), inputs=inputs, inside=[folder], option="-o", remote_ok=True)


@pytest.mark.slow  # a moto S3 server
def test_publish_file_local_and_remote(s3, tmp_path):
    got = publish_file(str(tmp_path / "r.html"), b"local")
    assert got == tmp_path / "r.html" and isinstance(got, Path) and got.read_bytes() == b"local"
    assert publish_file(s3.url("r.html"), b"remote") == s3.url("r.html") and s3.get("r.html") == b"remote"
    assert publish_file(s3.url("r.html"), b"again", overwrite=True) == s3.url("r.html") and s3.get("r.html") == b"again"
    assert s3.keys() == ["r.html"] and s3.uploads() == []


def test_publish_file_to_an_unreachable_store_is_one_line():
    with pytest.raises(InputError) as e:
        publish_file("http://127.0.0.1:1/r.html", b"x")
    assert str(e.value).startswith("http://127.0.0.1:1/r.html: ") and "\n" not in str(e.value)


# --------------------------------------------------------------------------- the report through a store


# --------------------------------------------------------------------------- estimate_documents


def test_estimate_documents_for_the_progress_bar(tmp_path):
    lines = [json.dumps({"text": "word " * (i % 50 + 1)}) for i in range(3000)]
    (tmp_path / "a.jsonl").write_text("\n".join(lines) + "\n")
    pq.write_table(pa.table({"text": ["x"] * 77}), tmp_path / "b.parquet")
    (tmp_path / "c.txt").write_text("one document")
    est = estimate_documents(nio.discover([str(tmp_path / "a.jsonl"), str(tmp_path / "b.parquet"),
                                           str(tmp_path / "c.txt")]))
    assert abs(est - (3000 + 77 + 1)) <= 0.05 * 3000
    assert estimate_documents([nio.table_source(pa.table({"text": ["a", "b"]}))]) == 2
    (tmp_path / "d.jsonl.gz").write_bytes(gzip.compress(b'{"text": "x"}\n'))
    assert estimate_documents(nio.discover([str(tmp_path / "d.jsonl.gz")])) is None


def test_estimate_documents_asks_no_store(tmp_path, no_store, monkeypatch):
    def refuse(path, *a, **kw):  # pyarrow reaches S3 by itself, without neardup.io.storage.fs
        raise AssertionError(f"a request to {path}")
    monkeypatch.setattr(pq, "ParquetFile", refuse)
    text = Source(path="s3://b/notes/e.txt", name="s3://b/notes/e.txt", relpath="e.txt", format="text")
    assert estimate_documents([text, text]) == 2  # a text file is one document: nothing to ask
    for fmt in ("jsonl", "parquet", "csv"):
        remote = Source(path=f"s3://b/x.{fmt}", name=f"s3://b/x.{fmt}", relpath=f"x.{fmt}", format=fmt)
        assert estimate_documents([text, remote]) is None
