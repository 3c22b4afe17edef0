"""Telling the user (issue 22): plurals, progress totals, counts of what was written, the
summary's words for unverified pairs and index removals."""

from __future__ import annotations

import io

import pytest

from helpers import run_in_process
from neardup.progress import _Lines, plural


def test_plural():
    assert [plural(n, "file") for n in (0, 1, 2)] == ["files", "file", "files"]
    assert plural(2, "match") == "matches" and plural(1, "match") == "match"
    assert plural(3, "bucket") == "buckets" and plural(1, "segment") == "segment"


def lines_of(total, updates, postfix=""):
    clock = iter([1.0] * len(updates) + [5.0])
    buf = io.StringIO()
    bar = _Lines("read", total=total, unit="doc", every=0.0, file=buf)
    bar._clock = lambda: next(clock)
    bar.start = bar._last = 0.0
    for n in updates:
        bar.update(n)
    if postfix:
        bar.set_postfix_str(postfix)
    bar.close()
    return buf.getvalue().splitlines()


def test_lines_say_one_doc_and_never_pass_an_estimated_total():
    # an estimate of 10 documents, 14 read: the count is never shown past its total
    assert lines_of(10, [6, 8]) == ["neardup: read: 6/10 docs after 1.0 s", "neardup: read: 14/14 docs after 1.0 s",
                                    "neardup: read done: 14 docs in 5.0 s"]
    assert lines_of(None, [1])[-1] == "neardup: read done: 1 doc in 5.0 s"


def test_done_line_carries_a_postfix():
    assert lines_of(2, [2], postfix="2 kept files written")[-1] == \
        "neardup: read done: 2 docs in 5.0 s (2 kept files written)"


def test_terminal_bar_never_passes_an_estimated_total():
    from neardup.progress import _tqdm
    buf = io.StringIO()
    with _tqdm()(total=10, desc="read", unit="doc", file=buf, ncols=80) as b:
        b.update(6)
        b.update(8)
        assert (b.n, b.total) == (14, 14)


# --------------------------------------------------------------------------- the summary

def stats_of(**counts):
    base = dict(input=10, kept=6, removed=4, rejected=0, clusters=2, candidate_pairs=9, verified_pairs=4,
                removed_against_index=0, truncated_buckets=0)
    base.update(counts)
    params = dict(threshold=0.8, num_perm=128, bands=13, rows=7, ngram=5, verify="exact", keep="first",
                  max_anchor_rounds=None)
    return {"counts": base, "params": params}


def test_summary_says_pairs_are_unverified_under_verify_none():
    from neardup.report.summary import format_summary
    stats = stats_of()
    assert "verified pairs 4" in format_summary(stats, "out")
    stats["params"]["verify"] = "none"
    text = format_summary(stats, "out")
    assert "verified pairs" not in text and "pairs taken unverified 4" in text


def test_summary_shows_removals_against_an_index_and_counts_in_plurals():
    from neardup.report.summary import format_summary
    assert "index" not in format_summary(stats_of(), "out")
    text = format_summary(stats_of(removed_against_index=1), "out")
    assert "of the removed, 1 document matched a document of the index" in text
    assert "3 documents matched" in format_summary(stats_of(removed_against_index=3), "out")
    text = format_summary(stats_of(truncated_buckets=1), "out")
    assert "note: 1 band bucket searched only in part (the work bound of the bucket search)" in text
    stats = stats_of(truncated_buckets=2)
    stats["params"]["max_anchor_rounds"] = 1
    assert "2 band buckets searched only in part (--max-anchor-rounds 1)" in format_summary(stats, "out")


# --------------------------------------------------------------------------- the Python API

def test_api_errors_name_keywords_not_flags_nor_the_index_column(tmp_path):
    import pandas as pd
    import pytest

    import neardup
    from neardup.errors import InputError
    with pytest.raises(InputError) as e:
        neardup.dedup(pd.DataFrame({"body": ["a b c", "d e f"]}))
    assert "--" not in str(e.value) and "__neardup" not in str(e.value), str(e.value)
    assert "columns: body;" in str(e.value) and "text_column" in str(e.value)
    path = tmp_path / "a.jsonl"
    path.write_text('{"body": "x y"}\n')
    with pytest.raises(InputError) as e:
        neardup.dedup(str(path), str(tmp_path / "out"))
    assert "--text-column" not in str(e.value) and "text_column body" in str(e.value), str(e.value)
    # the command line keeps its flags
    from helpers import run_in_process
    code, _, err = run_in_process("dedup", str(path), "-o", str(tmp_path / "out2"))
    assert code == 2 and "--text-column body" in err, err


def test_in_api_terms():
    from neardup.api import in_api_terms
    assert in_api_terms("pass --overwrite (overwrite=True) to replace") == "pass overwrite=True to replace"
    assert in_api_terms("with --no-nfkc and --char-ngrams") == "with normalize_unicode=False and char_ngrams=True"
    assert in_api_terms("raise --max-anchor-rounds; --no-such-flag") == "raise max_anchor_rounds; --no-such-flag"
    assert in_api_terms("columns: a, __neardup_index__") == "columns: a"
    assert in_api_terms("choose: --id-column NAME (id_column='NAME') for a field, or --id-column '' (id_column='') "
                        "for positions") == "choose: id_column='NAME' for a field, or id_column='' for positions"


def test_print_result_is_one_short_line():
    import neardup
    result = neardup.dedup(["the cat sat on the mat today", "the cat sat on the mat today!", "another text"] * 50)
    text = str(result)
    assert "\n" not in text and len(text) < 200, text
    assert text.startswith("DedupResult(kept=<list of 2>, removed=<148 rows>, clusters=<150 rows>, "
                           "rejected=<0 rows>, input=150")
    assert repr(result) == text


def test_minhasher_repr_makes_an_equal_hasher():
    from neardup import MinHasher
    assert repr(MinHasher()) == "MinHasher(num_perm=128, seed=42, ngram=5)"
    h = MinHasher(64, ngram=3, seed=7, punctuation="keep", workers=2)
    assert repr(h) == "MinHasher(num_perm=64, seed=7, ngram=3, punctuation='keep', workers=2)"
    again = eval(repr(h), {"MinHasher": MinHasher})
    assert again.shingling == h.shingling and (again.num_perm, again.seed) == (h.num_perm, h.seed)


def test_index_commands_count_in_plurals(tmp_path):
    from helpers import run_in_process
    (tmp_path / "a.jsonl").write_text('{"text": "one lonely document of several words here"}\n')
    ix = str(tmp_path / "IDX")
    code, _, err = run_in_process("index", "add", ix, str(tmp_path / "a.jsonl"))
    assert code == 0 and "added 1 document (0 empty, 0 rejected)" in err and ": 1 document in 1 segment," in err, err
    code, out, _ = run_in_process("index", "verify", ix)
    assert code == 0 and "is sound: 1 segment, 1 document," in out, out
    code, _, err = run_in_process("index", "compact", ix)
    assert code == 0 and ": 1 segment -> 1 in" in err, err


def test_help_of_dedup_names_it_dedup_and_lists_csv():
    # issue 30; guards: the line that names the wrapper "dedup" after functools.wraps (which copied
    # "run_dedup"), and CSV/TSV in the docstring's list of inputs
    import pydoc

    import neardup
    text = pydoc.render_doc(neardup.dedup, renderer=pydoc.plaintext)
    assert "function dedup in module neardup.api" in text and "\ndedup(source" in text
    assert "run_dedup" not in text
    assert "CSV ``.csv`` and TSV ``.tsv``" in text


@pytest.mark.slow
def test_lines_in_a_log_say_a_long_stage_is_alive_without_updates():
    # issue 30: a stage that counts one step at its end (candidates + verify) showed nothing in a
    # log file until then; guards: the timer thread of _Lines (not started: no line until the end)
    import time
    buf = io.StringIO()
    with _Lines("candidates + verify", total=1, unit="step", every=0.05, file=buf) as bar:
        time.sleep(0.3)
        alive = buf.getvalue().splitlines()
        bar.update(1)
    assert alive and alive[0].startswith("neardup: candidates + verify: 0/1 steps after 0."), alive
    lines = buf.getvalue().splitlines()
    assert lines[-1].startswith("neardup: candidates + verify done: 1 step in")
    time.sleep(0.15)
    assert buf.getvalue().splitlines() == lines  # nothing after the "done" line


# --------------------------------------------------------------------------- compile notices (issue 30)

@pytest.mark.slow
def test_compile_notice_is_said_once_when_a_kernel_compiles_and_never_from_the_cache():
    # guards: the "numba:compile" listener of progress.compile_notice (not registered: no notice)
    import contextlib

    import numba

    from neardup.progress import compile_notice
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        with compile_notice("neardup: compiling"):
            numba.njit(lambda x: x + 1)(1)   # a function never compiled before: numba compiles it
            numba.njit(lambda x: x + 2)(1)
        numba.njit(lambda x: x + 3)(1)       # outside the block: nothing said
    assert err.getvalue() == "neardup: compiling\n"
    err = io.StringIO()
    f = numba.njit(lambda x: x * 2)
    f(1)
    with contextlib.redirect_stderr(err), compile_notice("neardup: compiling"):
        f(2)                                 # already compiled: no notice
    assert err.getvalue() == ""


def test_index_add_says_when_it_compiles(tmp_path, monkeypatch):
    # `index add` compiled for a minute without a word; guards: the `with compile_notice()` around
    # add_files in cli/index.py (and the same wiring in index query and audit)
    import numba

    import neardup.api as api
    real = api.add_files

    def compiling_add(*args, **kwargs):  # the real add, after a kernel that numba has to compile
        numba.njit(lambda x: x - 1)(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(api, "add_files", compiling_add)
    (tmp_path / "a.txt").write_text("one two three four five six seven")
    code, _, err = run_in_process("index", "add", str(tmp_path / "ix"), str(tmp_path / "a.txt"))
    assert code == 0 and err.startswith("neardup: compiling the kernels (once per version"), err
    monkeypatch.setattr(api, "add_files", real)
    code, _, err = run_in_process("index", "add", str(tmp_path / "ix"), str(tmp_path / "a.txt"), "--name", "b")
    assert code == 0 and "compiling" not in err, err
