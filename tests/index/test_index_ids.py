"""``neardup index add`` and ``index query`` take a record's ids by the rule of ``neardup dedup``
(neardup.io.choose_id_column): --id-column, else an ``id`` field every input has, else positions."""

from __future__ import annotations

import json

from helpers import run_in_process as neardup

TEXT = " ".join(f"w{i}" for i in range(60))


def test_index_add_and_query_take_the_id_field_as_dedup_does(tmp_path):
    (tmp_path / "a.jsonl").write_text(json.dumps({"id": "doc-a", "text": TEXT}) + "\n")
    (tmp_path / "b.jsonl").write_text(json.dumps({"id": "doc-b", "text": TEXT + " end"}) + "\n")
    idx = str(tmp_path / "idx")
    ran = neardup("index", "add", idx, str(tmp_path / "a.jsonl"))
    assert ran.returncode == 0, ran.stderr
    ran = neardup("index", "query", idx, str(tmp_path / "b.jsonl"))
    assert ran.returncode == 0, ran.stderr
    row = json.loads(ran.stdout)
    assert row["id"] == "doc-b" and [m["id"] for m in row["matches"]] == ["doc-a"]
    # positions, asked for
    ran = neardup("index", "query", idx, str(tmp_path / "b.jsonl"), "--id-column", "")
    assert json.loads(ran.stdout)["id"] == "b.jsonl:1"  # as dedup names positions: the path below the common folder
