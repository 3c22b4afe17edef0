"""A run reads its report's member files ahead (neardup.report.html.read_ahead, in the write
stage's thread beside the copy of kept lines) and keeps what it read on its Run for its page
(no process-global state): the page is the same bytes, and what was read ahead is used only
while removed.parquet and clusters.parquet are the files it was read from."""

from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.parquet as pq

import neardup.report.html as report_html
from neardup.report.html import read_ahead, render_report

from test_report import make_output


def _stats(folder):
    return json.loads((folder / "stats.json").read_text())


def test_the_page_read_ahead_is_the_page(tmp_path):
    make_output(tmp_path)
    stats = _stats(tmp_path)
    page = render_report(tmp_path, plots="svg", stats=stats)
    ahead = read_ahead(tmp_path)
    assert {k[0] for k in ahead.values} == {"similarities", "sizes", "members"}
    assert render_report(tmp_path, plots="svg", stats=stats, ahead=ahead) == page
    assert not ahead.values  # each value used once, then let go


def test_what_was_read_ahead_of_files_since_replaced_is_not_used(tmp_path):
    make_output(tmp_path)
    stats = _stats(tmp_path)
    ahead = read_ahead(tmp_path)
    for name in ("removed.parquet", "clusters.parquet"):  # fewer rows: other sizes, similarities, members
        t = pq.read_table(tmp_path / name)
        pq.write_table(t.slice(0, len(t) // 2), tmp_path / name)
    page = render_report(tmp_path, plots="svg", stats=stats, ahead=ahead)
    assert page == render_report(tmp_path, plots="svg", stats=stats)
    assert len(ahead.values) == 3  # none of it used


def test_what_was_read_ahead_of_another_folder_is_not_used(tmp_path):
    for name in ("a", "b"):
        make_output(tmp_path / name)
    pq.write_table(pq.read_table(tmp_path / "b" / "removed.parquet").slice(0, 1), tmp_path / "b" / "removed.parquet")
    ahead = read_ahead(tmp_path / "a")
    stats = _stats(tmp_path / "b")
    assert render_report(tmp_path / "b", plots="svg", stats=stats, ahead=ahead) == \
        render_report(tmp_path / "b", plots="svg", stats=stats)
    assert len(ahead.values) == 3


def test_a_folder_read_ahead_of_unreadable_files_raises_where_the_page_is_drawn(tmp_path):
    make_output(tmp_path)
    (tmp_path / "removed.parquet").write_bytes(b"not parquet")
    ahead = read_ahead(tmp_path)  # raises nothing
    assert ahead is None
    try:
        render_report(tmp_path, plots="svg", stats=_stats(tmp_path), ahead=ahead)
    except Exception as exc:  # noqa: BLE001
        assert "removed.parquet" in str(exc)
    else:
        raise AssertionError("the page of an unreadable removed.parquet was drawn")


def test_a_run_reads_ahead_and_its_page_is_the_report_commands(tmp_path, monkeypatch):
    from helpers import run_cli
    lines = [json.dumps({"id": f"d{i}", "text": f"doc {i % 40} " + "shared words of a near duplicate " * 3})
             for i in range(200)]
    (tmp_path / "c.jsonl").write_text("\n".join(lines) + "\n")
    used = []
    real = report_html._ahead_or

    def spy(ahead, out, key, compute):
        used.append(key[0] if ahead is not None and ahead.holds(out, key) else None)
        return real(ahead, out, key, compute)

    monkeypatch.setattr(report_html, "_ahead_or", spy)
    out = tmp_path / "out"
    assert run_cli("dedup", tmp_path / "c.jsonl", "--output", out, "--quiet") == 0
    assert used == ["similarities", "sizes", "members"]
    page = (out / "report.html").read_bytes()
    assert run_cli("report", out, "--plots", "svg", "--output", tmp_path / "again.html") == 0
    assert (tmp_path / "again.html").read_bytes() == page
