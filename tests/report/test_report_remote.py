"""The report of a run folder on object storage (or a file:// URL), through the io seam's local
view of a remote folder: the same page as for a local folder, written back where asked."""

from __future__ import annotations

from pathlib import Path

import pytest

from neardup.errors import ConfigError, InputError
from neardup.report.html import write_report

from test_report import make_output


def _put_folder(s3, prefix: str, folder: Path) -> str:
    for p in folder.rglob("*"):
        if p.is_file():
            s3.put(f"{prefix}/{p.relative_to(folder).as_posix()}", p.read_bytes())
    return s3.url(prefix)


@pytest.mark.slow  # a moto S3 server
def test_report_of_a_remote_folder_is_the_local_one(s3, tmp_path):
    out = make_output(tmp_path / "out")
    (out / "kept" / "a.jsonl").write_bytes(b"x" * 3_000_000)
    url = _put_folder(s3, "out", out)
    assert write_report(url + "/", plots="svg") == f"{url}/report.html"
    assert s3.get("out/report.html") == write_report(out, plots="svg").read_bytes()
    assert "3.0 MB" in s3.get("out/report.html").decode()  # kept/ counted from its listing
    assert write_report(url, f"{url}/report.html", plots="svg") == f"{url}/report.html"  # its own: replaced
    target = tmp_path / "r.html"
    assert write_report(url, str(target), plots="svg") == target and target.read_bytes() == s3.get("out/report.html")
    with pytest.raises(ConfigError, match="it exists"):
        write_report(url, str(target), plots="svg")
    assert write_report(out, s3.url("else/r.html"), plots="svg") == s3.url("else/r.html")
    assert s3.get("else/r.html") == s3.get("out/report.html")
    with pytest.raises(ConfigError, match="it exists"):
        write_report(out, s3.url("else/r.html"), plots="svg")
    for target, needle in ((f"{url}/stats.json", "an input of this command"), (f"{url}/kept/r.html", "inside")):
        with pytest.raises(ConfigError, match=needle):
            write_report(url, target, plots="svg", overwrite=True)
    assert sorted(s3.keys()) == sorted(["else/r.html"] + [f"out/{p.relative_to(out).as_posix()}"
                                                          for p in out.rglob("*") if p.is_file()])


@pytest.mark.slow  # a moto S3 server
def test_report_of_a_remote_folder_object_with_stats_in_memory(s3, tmp_path):
    """The run's case: its output Folder on a store, stats.json not written yet (the stats are
    given): the page of the local folder, and nothing downloaded that is not there."""
    import json

    from neardup.io.storage.folder import Folder
    out = make_output(tmp_path / "out")
    stats = json.loads((out / "stats.json").read_text())
    (out / "stats.json").unlink()
    page = write_report(out, plots="svg", stats=stats).read_bytes()
    (out / "report.html").unlink()
    url = _put_folder(s3, "run", out)
    assert write_report(Folder.of(url), plots="svg", stats=stats) == f"{url}/report.html"
    assert s3.get("run/report.html") == page
    assert "run/stats.json" not in s3.keys()


@pytest.mark.slow  # a moto S3 server
def test_report_messages_name_the_remote_folder(s3, tmp_path):
    with pytest.raises(InputError, match=r"^s3://\S+/nothing: no stats.json here"):
        write_report(s3.url("nothing"), plots="svg")
    s3.put("bad/stats.json", b"{not json")
    with pytest.raises(InputError, match=r"^s3://\S+/bad/stats.json: cannot read it as JSON"):
        write_report(s3.url("bad"), plots="svg")
    with pytest.raises(InputError, match=f"^{tmp_path}/nope: not a folder$"):  # before the target is checked
        write_report(tmp_path / "nope", s3.url("r.html"), plots="svg")
    assert s3.keys() == ["bad/stats.json"]


def test_report_of_a_file_url_folder(tmp_path):
    out = make_output(tmp_path / "out")
    assert write_report(f"file://{out}", plots="svg") == out / "report.html"
