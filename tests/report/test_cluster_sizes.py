"""The report's cluster sizes read clusters.parquet a batch at a time (the report is drawn by the
driver, which must hold nothing a member: issue 28), and give what the whole column gives."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from neardup.report import output_folder
from neardup.report.output_folder import _cluster_column, cluster_sizes


def _expected(out):
    """Sizes and ids from the whole file, by the rule of the docstring: largest first, ties in
    the order first seen, only the clusters with a kept member."""
    t = pq.read_table(out / "clusters.parquet").to_pylist()
    seen, size, own = [], {}, {}
    for r in t:
        c = r["cluster"]
        if c is None:
            continue
        if c not in size:
            seen.append(c)
            size[c], own[c] = 0, False
        size[c] += 1
        own[c] |= bool(r["is_representative"])
    order = sorted((c for c in seen if own[c]), key=lambda c: (-size[c], seen.index(c)))
    return order, [size[c] for c in order]


def _write(out, rows):
    out.mkdir(exist_ok=True)
    pq.write_table(pa.table({"id": [r[0] for r in rows], "cluster": [r[1] for r in rows],
                             "is_representative": [r[2] for r in rows]}), out / "clusters.parquet")


def _rows(rng, clusters=300):
    rows = []
    for c in range(clusters):
        n = int(rng.integers(2, 9))
        kept = rng.random() > 0.1  # some clusters of documents removed against an index: no kept member
        rows += [(f"d{c}-{i}", f"c{c:04d}", bool(kept and i == 0)) for i in range(n)]
    return rows


@pytest.mark.parametrize("batch", [7, 64, 1 << 16])
def test_streamed_sizes_are_those_of_the_whole_column(tmp_path, monkeypatch, batch):
    rng = np.random.default_rng(3)
    rows = _rows(rng)
    rows.insert(5, ("n", None, False))  # a row without a cluster is no cluster
    _write(tmp_path, rows)
    monkeypatch.setattr(output_folder, "STREAM_BATCH", batch)  # runs cut by the batches
    ids, sizes = cluster_sizes(tmp_path, 20)
    order, want = _expected(tmp_path)
    assert sizes.tolist() == want
    assert ids.to_pylist() == order[:20]
    assert output_folder._streamed_cluster_sizes(tmp_path / "clusters.parquet", True, 20) is not None


def test_rows_of_a_cluster_apart_are_read_whole_not_miscounted(tmp_path, monkeypatch):
    rows = _rows(np.random.default_rng(4), 50)
    rows.append(("late", "c0001", False))  # cluster c0001's rows not together (not as neardup writes)
    _write(tmp_path, rows)
    monkeypatch.setattr(output_folder, "STREAM_BATCH", 16)
    assert output_folder._streamed_cluster_sizes(tmp_path / "clusters.parquet", True, None) is None
    ids, sizes = cluster_sizes(tmp_path)
    order, want = _expected(tmp_path)
    assert sizes.tolist() == want and ids.to_pylist() == order


def test_the_sizes_of_a_real_run(tmp_path):
    import neardup
    texts = [f"alpha beta gamma delta epsilon zeta eta theta iota kappa {i // 3} lambda mu" for i in range(60)]
    neardup.dedup(texts, output=str(tmp_path / "out"), threshold=0.5)
    ids, sizes = cluster_sizes(tmp_path / "out", 5)
    order, want = _expected(tmp_path / "out")
    assert len(want) > 0 and sizes.tolist() == want and ids.to_pylist() == order[:5]
    assert _cluster_column(tmp_path / "out") is not None


def test_run_hash_tells_strings_apart_by_their_bytes():
    """The hash that tells runs apart (numpy, no compiled kernel): equal strings hash equal, in
    any array and at any offset of it; different ones (empty, null as empty, prefixes, non-ASCII)
    differ."""
    values = ["", "a", "b", "ab", "ba", "aa", "a\x00", "é", "e\u0301", "c0001", "c0010", "x" * 300]
    h = output_folder._run_hash(pa.array(values))
    assert len(set(h.tolist())) == len(values)
    sliced = pa.array(["zz", "q"] + values).slice(2)  # offsets that do not start at 0
    assert output_folder._run_hash(sliced).tolist() == h.tolist()
    assert output_folder._run_hash(pa.array([None, "a"])).tolist() == h[:2].tolist()
    assert output_folder._run_hash(pa.array([], type=pa.string())).size == 0


def test_similarity_note_counts_the_finite_similarities(tmp_path):
    """The histogram's note: the similarities recorded (NaN, none recorded, left out), their
    min / median / max, and those below the threshold (read before the array is clipped in place)."""
    from neardup.report import html
    pq.write_table(pa.table({"similarity": pa.array([0.5, float("nan"), 0.8, 1.0, None], pa.float64())}),
                   tmp_path / "removed.parquet")
    page = html._similarity_histogram(tmp_path, html._Figures("svg"), 0.7)
    assert ("3 removed documents with a similarity: min 0.500, median 0.800, max 1.000; "
            "1 below the threshold") in page
