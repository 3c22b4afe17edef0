"""The temporary output of ``neardup.dedup(ray_dataset)`` without ``output``: kept until the
process exits when the call returns (the Dataset it returns reads it), removed at once when the
call fails. A stand-in Dataset and run (no Ray), and real Datasets whose call fails."""

from __future__ import annotations

import os
import tempfile
from types import SimpleNamespace

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import neardup
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



def _failing_block(how: str):
    """A map over a Dataset's blocks that fails on the block of document 25: ``raises``, or
    ``not text`` (its text column made integers: written, refused when the run reads it). Made
    here, so that Ray's workers get the function itself, not a reference to this test module."""
    def block(batch: pa.Table) -> pa.Table:
        if "document 25 " not in " ".join(batch.column("text").to_pylist()):
            return batch
        if how == "raises":
            raise ValueError("a bad block")
        return pa.table({"text": pa.array(range(batch.num_rows))})
    return block


@pytest.mark.slow
@pytest.mark.ray
@pytest.mark.parametrize("named", [False, True])
@pytest.mark.parametrize("how, failure", [("raises", "a bad block"), ("not text", "is not a string column")])
def test_a_real_dataset_that_fails_mid_run_leaves_no_temporary_output(ray_local, tmp_path, monkeypatch, named,
                                                                      how, failure):
    """A map over a real Dataset fails on one of its 4 blocks: while its rows are written (the map
    raises), or in the run, its output folder made (the block's text is not text). What the call
    made in the temp folder is gone; a folder the caller named stays."""
    # guards: dedup_dataset's removal of its temporary output (and of the rows written) when the call fails
    import ray
    temp = tmp_path / "temp"
    temp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(temp))  # where the call makes its folders
    monkeypatch.setattr(ray_data, "_TEMPORARY", [])
    rows = [{"text": f"document {i} " + "of the test " * 5} for i in range(40)]
    ds = ray.data.from_items(rows, override_num_blocks=4).map_batches(_failing_block(how), batch_format="pyarrow",
                                                                       batch_size=None)
    output = tmp_path / "named" if named else None
    with pytest.raises(Exception, match=failure):
        neardup.dedup(ds, output=output)
    assert os.listdir(temp) == [] and ray_data._TEMPORARY == []
    if named and how == "not text":
        assert output.is_dir()  # the run had made it: the caller's, never removed
