"""``neardup.dedup(ray_dataset)``: a Ray Data Dataset deduplicated on the Ray engine in the
cluster it lives in (the module's local one, ``ray_local``), its kept rows a Dataset.

Each Dataset's rows are also written as Parquet and given to the command line: the same documents
removed, the kept rows equal (every column, its type and its values, in input order). Ids are an
``id`` column (a Dataset from ``read_parquet``) or the Dataset's row numbers (``from_items``).
"""

from __future__ import annotations

import importlib
import tracemalloc

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

import neardup
from neardup.engines.ray_data import read_parquet_in_order
from neardup.errors import ConfigError

from helpers import run_in_process

import ray  # noqa: E402  a test dependency: missing, the suite fails, it is not skipped

pytestmark = [pytest.mark.slow, pytest.mark.ray,
              pytest.mark.filterwarnings("ignore::DeprecationWarning:ray.data.context")]

PAD = 60_000  # bytes of an unused column a row: what a driver gathering rows would hold (14 MB)


@pytest.fixture(scope="module")
def rows():
    from neardup.testing.synth import generate_corpus
    texts = generate_corpus(240, seed=5, doc_words=60).texts
    return [{"text": t, "n": i, "score": i / 3, "pad": f"{i:06d}" + "x" * PAD} for i, t in enumerate(texts)]


def table_of(ds) -> pa.Table:
    """A Dataset's rows as one Arrow table, in its order (for the comparison only)."""
    return pa.concat_tables(ray.get(ds.to_arrow_refs()))


def cli_run(folder, inputs, out) -> pa.Table:
    """The command line over ``inputs``: its removed.parquet (its kept/ is read by the caller)."""
    ran = run_in_process("dedup", *inputs, "--output", out, "--threshold", "0.8", "--quiet")
    assert ran.returncode == 0, ran.stderr
    return pq.read_table(f"{out}/removed.parquet")


@pytest.fixture(scope="module")
def from_items(ray_local, rows, tmp_path_factory):
    """dedup of a from_items Dataset (4 blocks, no id column), the driver's Python allocations
    traced: (result, peak bytes, the command line's removed and kept)."""
    d = tmp_path_factory.mktemp("items")
    ds = ray.data.from_items(rows, override_num_blocks=4)
    # what a first call imports and loads (modules, kernels: ~30 MB) is not what is measured
    neardup.dedup(["warm up the modules and the kernels", "warm up the modules and the kernels"])
    importlib.import_module("neardup.engines.ray")
    ray.data.from_items([{"text": "a"}]).write_parquet(str(d / "warm"))
    ray.data.read_parquet(str(d / "warm"))
    tracemalloc.start()
    try:
        result = neardup.dedup(ds, threshold=0.8)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    pq.write_table(pa.Table.from_pylist(rows), d / "rows.parquet")
    removed = cli_run(d, [d / "rows.parquet"], d / "cli")
    return result, peak, removed, pq.read_table(d / "cli" / "kept" / "rows.parquet")


def test_from_items_positions_agree_with_the_cli(from_items):
    # guards: ray_data.positions adding each file's offset (rows = starts.take(at) + row): without
    # it the ids of the 2nd to 4th blocks would be rows of the first
    result, _, removed, cli_kept = from_items
    cli_ids = sorted(int(i.rsplit(":", 1)[1]) for i in removed.column("id").to_pylist())
    assert result.removed.num_rows > 20 and max(cli_ids) > 120  # removals in every block
    assert sorted(result.removed.column("id").to_pylist()) == cli_ids
    reps = {int(i.rsplit(":", 1)[1]): int(r.rsplit(":", 1)[1])
            for i, r in zip(removed.column("id").to_pylist(), removed.column("representative").to_pylist())}
    assert dict(zip(result.removed.column("id").to_pylist(),
                    result.removed.column("representative").to_pylist())) == reps
    assert result.removed.column("source").unique().to_pylist() == ["<dataset>"]
    # the kept rows: every column, its type, its values, in input order
    assert table_of(result.kept).equals(cli_kept)
    assert result.stats["counts"]["kept"] == cli_kept.num_rows


def test_the_driver_gathers_no_rows(from_items, rows):
    # guards: ray_data.write_rows writing by Ray tasks (ds.write_parquet): with the rows taken
    # into the driver first (pq.write_table(pa.Table.from_pylist(ds.take_all()), ...)) the
    # driver's Python peak holds every row's pad column (240 x 60 KB = 14 MB; the
    # driver's own peak, Ray Data's bookkeeping, is about 3 MB)
    _, peak, _, _ = from_items
    print(f"the driver's Python peak: {peak:,} bytes")  # with -s: the measurement of the report
    assert peak < len(rows) * PAD / 2, f"the driver's Python allocations peaked at {peak:,} bytes"


def test_marks_on_a_dataset_are_the_removals_by_row_number(ray_local, rows, from_items):
    # guards: _MarkedPositions (marked/'s duplicate_of as the Dataset's row numbers): without it
    # they are positions in the files written by the call, gone once it returns
    result, _, _, _ = from_items
    ds = ray.data.from_items(rows, override_num_blocks=4)
    marked = table_of(neardup.dedup(ds, threshold=0.8, mark=True).kept)
    assert marked.num_rows == len(rows) and marked.column("n").to_pylist() == list(range(len(rows)))
    reps = dict(zip(result.removed.column("id").to_pylist(), result.removed.column("representative").to_pylist()))
    assert {n: d for n, d in zip(marked.column("n").to_pylist(), marked.column("duplicate_of").to_pylist())
            if d is not None} == reps
    kept = marked.filter(pc.is_null(marked.column("duplicate_of"))).drop_columns(
        ["duplicate_of", "cluster", "similarity", "duplicate_reason"])
    assert kept.equals(table_of(result.kept))


def test_read_parquet_with_an_id_column(ray_local, rows, tmp_path):
    # guards: the id rule of an in-memory table, an ``id`` column's values as the ids (with
    # ``options["id_column"] = ""`` in dedup_dataset, positions always, they are row numbers),
    # and a read_parquet Dataset of three files read in its order
    data = tmp_path / "data"
    data.mkdir()
    table = pa.Table.from_pylist([{"id": f"doc-{r['n']}", **r} for r in rows]).drop_columns(["pad"])
    for i, at in enumerate(range(0, table.num_rows, 100)):
        pq.write_table(table.slice(at, 100), data / f"part-{i}.parquet")
    # the Dataset read by Ray's V1 Parquet reader: the default one (V2) of Ray 2.60 may yield the
    # three files in another order (2-3 of 40 reads), and keep=first follows the Dataset's order
    result = neardup.dedup(read_parquet_in_order(str(data)), threshold=0.8, output=str(tmp_path / "out"))
    removed = cli_run(tmp_path, [data], tmp_path / "cli")
    assert sorted(result.removed.column("id").to_pylist()) == sorted(removed.column("id").to_pylist())
    assert result.removed.num_rows > 20 and result.output == str(tmp_path / "out")
    assert all(i.startswith("doc-") for i in result.removed.column("id").to_pylist())
    # where each removed row was: the Dataset's row number, not a file of the call's, now gone
    # (guards: dedup_dataset translating removed's source and row whatever the ids)
    assert result.removed.column("source").unique().to_pylist() == ["<dataset>"]
    cli_rows = {i: int(p.rsplit("-", 1)[1].split(".")[0]) * 100 + r for i, p, r in zip(
        removed.column("id").to_pylist(), removed.column("source").to_pylist(), removed.column("row").to_pylist())}
    assert dict(zip(result.removed.column("id").to_pylist(), result.removed.column("row").to_pylist())) == cli_rows
    cli_kept = pa.concat_tables(pq.read_table(tmp_path / "cli" / "kept" / f"part-{i}.parquet") for i in range(3))
    assert table_of(result.kept).equals(cli_kept)
    assert result.kept.context.use_datasource_v2 is False  # guards: read_kept by read_parquet_in_order


def test_read_parquet_in_order_reads_the_files_in_order_and_puts_the_context_back(ray_local, tmp_path):
    # guards: read_parquet_in_order choosing Ray's V1 reader for the Dataset it makes (the default
    # V2 one of Ray 2.60 yielded one read task's three files out of order in 2-3 of 40 reads:
    # ten reads here catch it more often than not) and putting the caller's choice back
    from ray.data.context import DataContext
    files = []
    for i in range(3):
        files.append(str(tmp_path / f"part-{i}.parquet"))
        pq.write_table(pa.table({"n": list(range(i * 100, i * 100 + 100))}), files[-1])
    ctx = DataContext.get_current()
    before = ctx.use_datasource_v2
    ds = read_parquet_in_order(files)
    assert ctx.use_datasource_v2 == before and ds.context.use_datasource_v2 is False
    ds.context.execution_options.preserve_order = True
    for _ in range(10):
        assert table_of(ds).column("n").to_pylist() == list(range(300))


@pytest.mark.parametrize("option, message", [("mark_against", "mark with against is not supported for a Ray Dataset"),
                                             ("ray_address", "ray_address: a Ray Dataset is deduplicated in the Ray"),
                                             ("resume", "resume is not supported for a Ray Dataset")])
def test_options_a_dataset_cannot_take_are_refused(ray_local, option, message):
    # guards: each refusal at the top of dedup_dataset (mark with against: an index's ids and row
    # numbers in one column, ray_address: a second cluster, resume: a run over rows written anew),
    # before anything is written
    kwargs = {"mark_against": {"mark": True, "against": ["some-index"]}, "ray_address": {"ray_address": "127.0.0.1:1"},
              "resume": {"resume": True}}[option]
    with pytest.raises(ConfigError, match=message):
        neardup.dedup(ray.data.from_items([{"text": "a"}]), **kwargs)


def test_an_empty_dataset_keeps_nothing_and_runs_nothing(ray_local):
    # guards: ray_data.dedup_dataset's `if not files:` (no file written: no run over an empty folder)
    empty = ray.data.from_items([{"text": "a", "n": 1}]).limit(0)
    result = neardup.dedup(empty)
    assert result.kept is empty and result.removed.num_rows == 0 and result.output is None


def test_a_kept_format_other_than_parquet_is_refused_before_any_work(ray_local):
    # guards: the output_format check at the top of dedup_dataset (else a whole run, then no Dataset)
    with pytest.raises(ConfigError, match="output_format='jsonl'"):
        neardup.dedup(ray.data.from_items([{"text": "a"}]), output_format="jsonl")


def test_a_bad_row_is_named_by_its_row_in_the_dataset_not_by_a_file_written(ray_local):
    # errors named the Parquet files the rows were written to (a temporary folder, gone when the
    # call returns): "/tmp/neardup-rows-.../..._000001-0.parquet: row 0: duplicate id 'a' (first at
    # ..._000000-0.parquet: row 0)"; they name the Dataset's rows, as removed and rejected do
    from neardup.errors import InputError
    texts = ["the cat sat on the mat today and it was fine", "a text of other words entirely here",
             "and one more text that is not like them"]
    ds = ray.data.from_items([{"text": t, "id": i} for t, i in zip(texts, ["a", "b", "a"])], override_num_blocks=3)
    with pytest.raises(InputError) as e:
        neardup.dedup(ds)
    assert str(e.value).startswith("<dataset>: row 2: duplicate id 'a' (first at <dataset>: row 0)"), str(e.value)
    assert "neardup-rows-" not in str(e.value) and "parquet" not in str(e.value)
