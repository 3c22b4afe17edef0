"""The temporary output of ``neardup.dedup(ray_dataset)`` without ``output``: kept until the
process exits when the call returns (the Dataset it returns reads it), removed at once when the
call fails. A stand-in Dataset and run: no Ray here."""

from __future__ import annotations

import os
import tempfile
from types import SimpleNamespace

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from neardup.engines import ray_data
from neardup.errors import InputError


class _Rows:
    """What dedup_dataset uses of a Dataset: its context's preserve_order, and write_parquet."""

    context = SimpleNamespace(execution_options=SimpleNamespace(preserve_order=False))

    def write_parquet(self, folder):
        pq.write_table(pa.table({"text": ["a text"]}), os.path.join(folder, "rows_000000-0.parquet"))


def test_a_failed_call_leaves_no_temporary_output(tmp_path, monkeypatch):
    # guards: dedup_dataset removing the output it made when the run fails (it was kept, empty
    # or half written, until the process exited)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # a temp folder of this test's own
    monkeypatch.setattr(ray_data, "_TEMPORARY", [])
    outputs = []

    def failing_run(source, output, **options):
        outputs.append(output)
        open(os.path.join(output, ".neardup"), "w").close()
        raise InputError("rows_000000-0.parquet: a bad record")

    with pytest.raises(InputError, match="a bad record"):
        ray_data.dedup_dataset(failing_run, _Rows(), None, {})
    assert outputs and outputs[0].startswith(str(tmp_path))  # the run had a temporary output
    assert os.listdir(tmp_path) == [] and ray_data._TEMPORARY == []
