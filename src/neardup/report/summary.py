"""The summary of a run in words: what the command line prints when a run ends
(:meth:`neardup.api.DedupResult.summary`)."""

from __future__ import annotations

from ..io.storage.paths import redact
from ..progress import plural


def file_notes(files: dict) -> str:
    """What was left out of the input files or read once (stats.json's ``files``), in words."""
    def n(k: int, one: str, many: str) -> str:
        return f"{k:,} {one if k == 1 else many}"

    parts = [n(files["inputs"], "input file", "input files")]
    if files.get("skipped_binary"):
        parts.append(n(files["skipped_binary"], "binary or non-UTF-8 file", "binary or non-UTF-8 files") + " skipped")
    if files.get("skipped_not_records"):
        parts.append(n(files["skipped_not_records"], ".json file", ".json files")
                     + " of no JSON Lines records skipped (--input-format text reads them as documents)")
    if files.get("skipped_compressed"):
        parts.append(n(files["skipped_compressed"], "unreadable compressed file", "unreadable compressed files")
                     + " skipped (cut short or damaged)")
    if files.get("skipped_no_text_field"):
        parts.append(n(files["skipped_no_text_field"], "data file", "data files")
                     + " without the text field skipped (--text-column names another)")
    if files.get("skipped_empty"):
        parts.append(n(files["skipped_empty"], "empty data file", "empty data files") + " (no records)")
    if files.get("links_read_once"):
        parts.append(n(files["links_read_once"], "symbolic link", "symbolic links") + " to files of the input read once")
    if files.get("links_not_followed"):
        parts.append(n(files["links_not_followed"], "symbolic link", "symbolic links")
                     + " leading out of the input not followed (--follow-symlinks)")
    if files.get("hard_links_read_once"):
        parts.append(n(files["hard_links_read_once"], "hard link", "hard links") + " to files of the input read once")
    return ", ".join(parts)


def format_summary(stats: dict, output: str) -> str:
    c = stats["counts"]
    p = stats["params"]
    secs = stats.get("seconds", {})
    total = sum(secs.values()) if secs else 0.0
    pct = (100.0 * c["removed"] / c["input"]) if c["input"] else 0.0
    lines = [
        "",
        f"neardup: {c['input']:,} {plural(c['input'], 'document')} in, {c['kept']:,} kept, {c['removed']:,} removed ({pct:.1f}%), "
        f"{c['rejected']:,} rejected",
        f"  clusters {c['clusters']:,}   candidate pairs {c['candidate_pairs']:,}   " + (
            f"pairs taken unverified {c['verified_pairs']:,} (verify=none: every candidate pair counts)"
            if p["verify"] == "none" else f"verified pairs {c['verified_pairs']:,}"),
        f"  threshold {p['threshold']:g}  k={p['num_perm']}  {p['bands']} bands x {p['rows']} rows  "
        f"{shingle_rule(p)}  verify={p['verify']}  keep={p['keep']}",
    ]
    if c.get("removed_against_index"):
        n = c["removed_against_index"]
        lines.insert(2, f"  of the removed, {n:,} {plural(n, 'document')} matched a document of the index (--against)")
    for note in stats.get("notes", []):
        lines.append(f"  note: {note}")
    for ix in stats.get("indexes", []):
        if ix["recall_note"]:
            lines.append(f"  note: {ix['recall_note']}")
        if ix.get("rate_warning"):
            lines.append(f"  warning: {ix['rate_warning']}")
        if ix["truncated_buckets"]:
            lines.append(f"  warning: index {ix['index']}: {ix['truncated_buckets']:,} band buckets held more than "
                         f"{ix['max_bucket']:,} documents a segment; {ix['truncated_candidates']:,} candidates in "
                         f"them were not verified (a match among them can be missed)")
    update = stats.get("index_update") or {}
    if update:
        lines.append(f"  --update-index: {update['added']:,} kept {plural(update['added'], 'document')} added to "
                     f"{redact(update['index'])}")
    if update.get("rate_warning"):
        lines.append(f"  warning: --update-index: {update['rate_warning']}")
    files = stats.get("files") or {}
    if any(v for k, v in files.items() if k != "inputs"):  # a file skipped, a link read once or not followed
        lines.append("  files: " + file_notes(files))
    if c.get("truncated_buckets"):
        lines.append("  note: " + bucket_note(c["truncated_buckets"], c.get("buckets"), p.get("max_anchor_rounds")))
    if secs:
        lines.append("  seconds: " + "  ".join(f"{k} {v:.1f}" for k, v in secs.items()) + f"  (total {total:.1f})")
    folder = "marked/" if "marked_files" in stats else "kept/"  # --mark: every document, marked
    shown = redact(output)
    shown += "" if shown.endswith("/") else "/"  # an output given as out/ is shown out/, not out//
    lines.append(f"  output: {shown} ({folder}, removed.parquet, clusters.parquet, stats.json, report.html)")
    return "\n".join(lines)


def bucket_note(n: int, buckets, rounds) -> str:
    """The note on band buckets whose search stopped with members never compared with each other
    (:func:`neardup.kernels.bands.find_pairs`): only verified pairs are ever removed, so no false
    removal comes of it; a near-duplicate pair among those members is missed only when no other
    band makes it a candidate, which ``neardup audit`` measures. Boilerplate (licence headers)
    makes such buckets."""
    of = f" of {buckets:,}" if buckets else ""
    bound = (f"--max-anchor-rounds {rounds}" if rounds else "the work bound of the bucket search")
    return (f"{n:,}{of} band {plural(n, 'bucket')} searched only in part ({bound}): never a false removal; "
            f"a near-duplicate pair among their members is missed only if no other band pairs it "
            f"('neardup audit' measures the misses)")


def shingle_rule(p: dict) -> str:
    """The shingles in force, in words: "word 5-grams" under the default rule, with what differs
    from it in brackets ("word 5-grams (punctuation keep, case kept)", "char 7-grams")."""
    char = bool(p.get("char_ngrams"))
    differs = []
    if p.get("punctuation", "split") != "split":
        differs.append(f"punctuation {p['punctuation']}")
    if p.get("normalize_unicode") is False:
        differs.append("no NFKC")
    if p.get("lowercase") is False:
        differs.append("case kept")
    if char and p.get("collapse_whitespace") is False:
        differs.append("white space kept")
    if p.get("hash_version", 2) != 2:
        differs.append(f"hash version {p['hash_version']}")
    return f"{'char' if char else 'word'} {p['ngram']}-grams" + (f" ({', '.join(differs)})" if differs else "")
