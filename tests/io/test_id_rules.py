"""One id per document (issue 29): the id a document gets is the same in kept/ (every format),
removed.parquet, clusters.parquet and the API's result, and the ``id`` field of the inputs is
found by reading whole records, never a switch to positions because a record is long."""

from __future__ import annotations

import json

import pyarrow.parquet as pq

from helpers import run_in_process as neardup

TEXT = " ".join(f"w{i}" for i in range(80))


def test_a_text_folder_written_as_jsonl_has_the_ids_of_removed_parquet(tmp_path):
    # given as an absolute path: kept/ wrote the path as typed, removed.parquet the path below
    # the folder; a join by id found nothing
    src = tmp_path / "docs"
    (src / "sub").mkdir(parents=True)
    (src / "NEWS").write_text(TEXT)
    (src / "sub" / "NEWS.copy").write_text(TEXT)
    (src / "other").write_text(" ".join(f"v{i}" for i in range(80)))
    out = tmp_path / "out"
    ran = neardup("dedup", str(src.resolve()), "-o", str(out), "--output-format", "jsonl", "--quiet")
    assert ran.returncode == 0, ran.stderr
    kept_ids = {json.loads(line)["id"] for p in (out / "kept").rglob("*.jsonl") for line in p.read_text().splitlines()}
    removed_ids = set(pq.read_table(out / "removed.parquet").column("id").to_pylist())
    clusters_ids = set(pq.read_table(out / "clusters.parquet").column("id").to_pylist())
    assert kept_ids == {"NEWS", "other"} and removed_ids == {"sub/NEWS.copy"}
    assert clusters_ids == kept_ids & clusters_ids | removed_ids and "NEWS" in clusters_ids
    assert pq.read_table(out / "removed.parquet").column("representative").to_pylist() == ["NEWS"]


def test_a_first_record_over_a_mib_keeps_the_id_field(tmp_path):
    # the probe of the id field read 1 MiB: a longer first record hid its id and every input
    # silently took positional ids
    big = " ".join(f"x{i}" for i in range(200_000))  # > 1 MiB
    assert len(big) > 1 << 20
    path = tmp_path / "a.jsonl"
    path.write_text(json.dumps({"id": "long", "text": big}) + "\n"
                    + json.dumps({"id": "one", "text": TEXT}) + "\n"
                    + json.dumps({"id": "two", "text": TEXT}) + "\n")
    out = tmp_path / "out"
    ran = neardup("dedup", str(path), "-o", str(out), "--quiet")
    assert ran.returncode == 0, ran.stderr
    assert pq.read_table(out / "removed.parquet").column("id").to_pylist() == ["two"]
