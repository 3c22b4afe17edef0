"""The summary of a run (issue 30): the word rule in force, --update-index, and a bucket note
that says what it means for the result."""

from __future__ import annotations

from neardup.report.summary import format_summary


def stats_of(counts=None, **params):
    c = dict(input=10, kept=6, removed=4, rejected=0, clusters=2, candidate_pairs=9, verified_pairs=4,
             removed_against_index=0, buckets=40, truncated_buckets=0)
    c.update(counts or {})
    p = dict(threshold=0.8, num_perm=128, bands=13, rows=7, ngram=5, verify="exact", keep="first",
             max_anchor_rounds=None, char_ngrams=False, punctuation="split", normalize_unicode=True,
             lowercase=True, collapse_whitespace=True, hash_version=2)
    p.update(params)
    return {"counts": c, "params": p}


def test_summary_names_the_word_rule_in_force():
    # guards: shingle_rule's bracket of what differs from the default dropped (the old summary said
    # "word 5-grams" under --punctuation keep)
    assert "  word 5-grams  verify=exact" in format_summary(stats_of(), "out")
    assert "word 5-grams (punctuation keep)  verify" in format_summary(stats_of(punctuation="keep"), "out")
    text = format_summary(stats_of(char_ngrams=True, ngram=7, collapse_whitespace=False, lowercase=False), "out")
    assert "char 7-grams (case kept, white space kept)  verify" in text


def test_summary_says_what_update_index_added():
    # guards: the "--update-index: N kept documents added to INDEX" line dropped (the old summary
    # said nothing of it)
    stats = stats_of()
    stats["index_update"] = {"index": "s3://bucket/ix", "added": 1234}
    assert "  --update-index: 1,234 kept documents added to s3://bucket/ix" in format_summary(stats, "out")
    stats["index_update"] = {"index": "redis://:secret@host:6379/0", "added": 1}
    text = format_summary(stats, "out")
    assert "1 kept document added" in text and "secret" not in text
    assert "--update-index" not in format_summary(stats_of(), "out")


def test_bucket_note_says_what_it_means_and_what_to_do():
    # guards: the old note ("N buckets still had unverified members ...") without its meaning
    text = format_summary(stats_of({"truncated_buckets": 9}), "out")
    note = [line for line in text.splitlines() if "band bucket" in line]
    assert note == ["  note: 9 of 40 band buckets searched only in part (the work bound of the bucket search): never "
                    "a false removal; a near-duplicate pair among their members is missed only if no other band "
                    "pairs it ('neardup audit' measures the misses)"]


def test_summary_names_an_output_given_with_a_slash_once():
    # `neardup dedup sigs/ --input-format signatures --output out/` (README, "Signatures in and
    # out") printed "output: out// (kept/, ...)"
    assert "  output: out/ (kept/, removed.parquet" in format_summary(stats_of(), "out/")
    assert "  output: out/ (kept/, removed.parquet" in format_summary(stats_of(), "out")
    assert "  output: s3://bucket/out/ (kept/" in format_summary(stats_of(), "s3://bucket/out/")
