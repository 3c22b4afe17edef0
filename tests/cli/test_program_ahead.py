"""The ``neardup`` program's start: a run that never imports numpy.ma (numba's typing of a plain
array, the write stage's ranges, the report's quantiles and id filter) nor, without ids in its
records or with integer ids read by pyarrow, pyarrow.compute (decimal strings)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from helpers import SRC, child_env


def _python(code: str, cwd=None) -> subprocess.CompletedProcess:
    env = dict(child_env(), PYTHONPATH=SRC + os.pathsep + os.environ.get("PYTHONPATH", ""))
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env=env, capture_output=True, text=True,
                          timeout=300, cwd=cwd)


@pytest.mark.slow
def test_a_program_run_does_not_import_numpy_ma(tmp_path):
    """numpy.ma costs 8-10 CPU-ms: numba's typing of an array asks for it (the read stage's first
    kernel calls), numpy 2.4's ``np.unique`` (and so ``np.isin``, ``np.quantile``) too; a run
    and its report make none of those calls."""
    lines = [json.dumps({"id": i, "text": f"doc {i % 40} " + "shared words of a near duplicate " * 3})
             for i in range(400)]
    (tmp_path / "c.jsonl").write_text("\n".join(lines) + "\n")
    r = _python(f"""
        import atexit, os, sys
        atexit.register(lambda: print("numpy.ma" in sys.modules, "numba" in sys.modules))
        sys.argv = ["neardup", "dedup", {str(tmp_path / "c.jsonl")!r}, "--output", {str(tmp_path / "out")!r}, "--quiet"]
        from neardup.cli import main
        main()
    """, cwd=str(tmp_path))
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["False", "True"], r.stdout + r.stderr
    stats = json.loads((tmp_path / "out" / "stats.json").read_text())
    assert stats["counts"]["removed"] > 0 and (tmp_path / "out" / "report.html").is_file()


def test_numbas_type_of_a_plain_array_is_its_own():
    r = _python("""
        import numpy as np
        from numba.core.typing.typeof import typeof_impl, Purpose
        from numba.core.typing.typeof import _TypeofContext
        numbas = typeof_impl.dispatch(np.ndarray)
        from neardup.cli import _type_plain_arrays
        _type_plain_arrays()
        ours = typeof_impl.dispatch(np.ndarray)
        assert ours is not numbas
        c = _TypeofContext(Purpose.argument)
        base = np.arange(24, dtype=np.int64).reshape(4, 6)
        ro = np.zeros(5, np.uint8); ro.flags.writeable = False
        cases = [base, base.T, base[:, ::2], base[0], np.zeros(0, np.float32), np.array(3.5), ro,
                 np.zeros(3, "datetime64[ns]"), np.zeros(3, [("a", np.int32), ("b", np.float64)]),
                 np.frombuffer(b"abcd", np.uint8), np.zeros((2, 2), np.complex128, order="F")]
        for a in cases:
            assert ours(a, c) == numbas(a, c), a.dtype
        for a in (np.ma.masked_array([1, 2]),):  # numba's own error
            errors = []
            for f in (ours, numbas):
                try:
                    f(a, c)
                    errors.append(None)
                except Exception as e:
                    errors.append((type(e), str(e)))
            assert errors[0] is not None and errors[0] == errors[1], errors
        print("ok")
    """)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["ok"]


def test_the_reports_quantiles_are_numpys():
    from neardup.report.html import _min_median_max
    rng = np.random.default_rng(7)
    for n in list(range(1, 40)) + [999, 1000, 21_500]:
        for trial in range(30 if n < 40 else 5):
            x = rng.random(n)
            if trial % 3 == 0:
                x = np.round(0.75 + x * 0.25, 2)  # repeats, as similarities have
            assert _min_median_max(x.copy()) == tuple(np.quantile(x, [0.0, 0.5, 1.0]).tolist()), (n, trial)


def test_the_id_filters_membership_is_numpys_isin():
    from neardup.report.output_folder import _among
    rng = np.random.default_rng(3)
    for n, m in ((0, 3), (5, 0), (1, 1), (100, 7), (5000, 300), (20_000, 50)):
        a = rng.integers(0, 2**64, n, dtype=np.uint64)
        values = np.concatenate([rng.choice(a, min(m, n)) if n else a[:0],
                                 rng.integers(0, 2**64, m, dtype=np.uint64)])[:max(m, 0)]
        assert np.array_equal(_among(a, values), np.isin(a, values)), (n, m)
        assert _among(a, values).dtype == bool


def test_decimal_strings_are_arrows_cast():
    """Positional ids (``PATH:LINE``) and integer ids read by pyarrow written in decimal in numpy,
    equal to Arrow's cast and join (which import pyarrow.compute and set up Arrow's casts): every
    digit count, negative numbers and int64's extremes, a non-ASCII path."""
    import pyarrow as pa
    import pyarrow.compute as pc

    from neardup.kernels.arrays import cast_strings, decimal_strings
    rng = np.random.default_rng(5)
    ends = np.array([0, -1, 9, -9, 10, -10, 99, 100, 10**18 - 1, 10**18, -10**18, 2**63 - 1, -2**63])
    cases = [np.arange(0, 1205), np.array([0]), np.zeros(0, np.int64), rng.integers(0, 2**63 - 1, 500),
             rng.integers(-2**63, 2**63 - 1, 500), ends, np.arange(0, 150_000) * 7]
    for prefix in ("c.jsonl:", "dir/é 名/x.jsonl:", ""):
        for numbers in cases:
            got = decimal_strings(numbers, prefix=prefix)
            got.validate(full=True)
            want = pc.binary_join_element_wise(prefix, pa.array(numbers.astype(np.int64)).cast(pa.string()), "")
            assert got.type == pa.string() and got.equals(want.cast(pa.string())), (prefix, numbers[:4])
    for numbers in cases:
        for t in (pa.int64(), pa.int32()):
            arr = pa.array(numbers.astype(np.int64)).slice(0)
            if t == pa.int32():
                arr = pa.array(np.clip(numbers, -2**31, 2**31 - 1).astype(np.int32))
            assert cast_strings(arr, pa.string()).equals(arr.cast(pa.string()))
    sliced = pa.array(np.arange(-50, 50)).slice(7, 30)
    assert cast_strings(sliced, pa.string()).equals(sliced.cast(pa.string()))
    with_nulls = pa.array([1, None, -3])
    assert cast_strings(with_nulls, pa.string()).equals(with_nulls.cast(pa.string()))  # (Arrow's)


@pytest.mark.slow
def test_a_run_of_records_without_ids_does_not_import_pyarrow_compute(tmp_path):
    """Positional ids, and integer ids that pyarrow's JSON reader reads (the scanner off)."""
    lines = [json.dumps({"text": f"doc {i % 40} " + "shared words of a near duplicate " * 3}) for i in range(300)]
    (tmp_path / "p.jsonl").write_text("\n".join(lines) + "\n")
    (tmp_path / "i.jsonl").write_text("".join(json.dumps({"id": i - 5, "text": json.loads(line)["text"]}) + "\n"
                                              for i, line in enumerate(lines)))
    r = _python(f"""
        import os, sys
        from neardup.cli import main
        os.environ["NEARDUP_JSONL_SCANNER"] = "0"
        for name in ("p.jsonl", "i.jsonl"):
            code = main(["dedup", os.path.join({str(tmp_path)!r}, name), "--output",
                         os.path.join({str(tmp_path)!r}, "out-" + name), "--quiet"])
            print(code, "pyarrow.compute" in sys.modules)
    """)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["0", "False", "0", "False"], r.stdout + r.stderr
    import pyarrow.parquet as pq
    removed = pq.read_table(tmp_path / "out-i.jsonl" / "removed.parquet").to_pydict()
    assert removed["id"][:2] == ["35", "36"] and removed["representative"][0] == "-5"
    import pyarrow.parquet as pq
    removed = pq.read_table(tmp_path / "out-p.jsonl" / "removed.parquet").to_pydict()
    assert removed["id"][:2] == ["p.jsonl:41", "p.jsonl:42"] and removed["representative"][0] == "p.jsonl:1"
