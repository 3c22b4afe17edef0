"""Removing documents from an index (neardup index remove, Index.remove): by id and by source, on
a folder and on a real redis-server; removed documents never match, before or after compaction;
concurrent writers; a kill during a removal; compaction in bounded pieces."""

import os
import signal
import subprocess

import numpy as np
import pytest

from neardup.errors import ConfigError, InputError
from neardup.index import Index
from neardup.index import compaction

from helpers import child_env as env, neardup_command as cli, run_in_process, run_process, write_jsonl
from index_corpus import make_split


@pytest.fixture(scope="module")
def split():
    return make_split(600, seed=7)


def build(location, split, parts=4):
    """The A documents in ``parts`` segments, each its own source ``partK``."""
    idx = Index(location)
    n = len(split.a_texts)
    step = -(-n // parts)
    for k in range(parts):
        idx.add(split.a_texts[k * step:(k + 1) * step], ids=split.a_ids[k * step:(k + 1) * step], name=f"part{k}")
    return idx


def matched(results):
    return {(m.id, m.source) for r in results for m in r}


def without(results, gone_ids=(), gone_sources=()):
    return [[m for m in r if m.id not in gone_ids and m.source not in gone_sources] for r in results]


def check_removal(location, split):
    """Removes 40 ids and a source, then compacts: the removed documents never match, every
    other answer is the same as before; the counts follow."""
    idx = build(location, split)
    probe = split.a_texts + split.b_texts
    before = idx.query(probe)
    gone_ids = set(split.a_ids[::15][:40])
    part1 = {m.id for r in before for m in r if m.source == "part1"}
    assert part1 and gone_ids - part1
    r = idx.remove(ids=sorted(gone_ids) + ["no-such-id"], source="part1")
    assert r["ids_given"] == len(gone_ids) + 1 and r["ids_found"] == len(gone_ids)
    want = without(before, gone_ids, {"part1"})
    fresh = Index(location)  # another reader sees it at once
    for reader in (idx, fresh):
        got = reader.query(probe)
        assert got == want
        assert not {i for i, _ in matched(got)} & (gone_ids | part1)
    s = fresh.stats()
    removed = len(gone_ids | part1)
    assert r["removed"] == removed and s["removed"] == removed
    assert s["documents"] == len(split.a_texts) - removed and s["sources"]["part1"] == 0
    assert Index(location).verify()["problems"] == []
    # removing again removes nothing more; the counts stay
    again = Index(location).remove(ids=sorted(gone_ids), source="part1")
    assert again["removed"] == 0 and again["ids_found"] == len(gone_ids)
    c = Index(location).compact()
    assert c["removed"] == removed and c["segments_after"] <= c["segments_before"]
    after = Index(location)
    assert after.query(probe) == want
    s = after.stats()
    assert s["removed"] == 0 and s["documents"] == len(split.a_texts) - removed and "part1" not in s["sources"]
    manifest = after.storage.read_manifest()
    assert not any(e.get("dead") for e in manifest["segments"])
    assert after.verify()["problems"] == []
    return after, manifest


def test_removed_ids_and_sources_never_match_before_or_after_compaction(tmp_path, split):
    path = str(tmp_path / "ix")
    after, manifest = check_removal(path, split)
    # what is on disk: the committed segments only (the tombstones and old segments are gone)
    assert sorted(os.listdir(os.path.join(path, "segments"))) == sorted(e["name"] for e in manifest["segments"])


def test_compaction_after_removal_equals_an_index_of_the_documents_left(tmp_path, split):
    """The merged segment, file by file, is the segment one add of the documents left makes
    (same order, same keys): compaction streams but lays out exactly what a writer would."""
    idx = build(str(tmp_path / "ix"), split, parts=5)
    gone = set(split.a_ids[3::7])
    idx.remove(ids=sorted(gone), source="part2")
    idx.compact()
    left = [(t, i, f"part{k}") for k in range(5) for t, i in zip(*_part(split, k, 5)) if i not in gone and k != 2]
    one = Index(str(tmp_path / "one"))
    with one.writer() as w:
        for k in (0, 1, 3, 4):
            rows = [x for x in left if x[2] == f"part{k}"]
            w.add([x[0] for x in rows], ids=[x[1] for x in rows], name=f"part{k}")
    (a,) = idx.storage.read_manifest()["segments"]
    (b,) = one.storage.read_manifest()["segments"]
    assert a["sources"] == b["sources"] and a["source_docs"] == b["source_docs"] and a["docs"] == b["docs"]
    assert {f: i["crc32"] for f, i in a["files"].items()} == {f: i["crc32"] for f, i in b["files"].items()}


def _part(split, k, parts):
    n = len(split.a_texts)
    step = -(-n // parts)
    return split.a_texts[k * step:(k + 1) * step], split.a_ids[k * step:(k + 1) * step]


def test_compaction_holds_bounded_pieces_whatever_the_segment_sizes(tmp_path, split, monkeypatch):
    """With small bounds, no read or written piece exceeds them, and the result is the same
    segment as with the default bounds."""
    def compacted(name):
        idx = build(str(tmp_path / name), split, parts=6)
        idx.remove(ids=split.a_ids[::9])
        idx.compact()
        return idx.storage.read_manifest()["segments"][0]

    want = compacted("big")
    monkeypatch.setattr(compaction, "CHUNK_DOCS", 16)
    monkeypatch.setattr(compaction, "CHUNK_VALUES", 256)
    monkeypatch.setattr(compaction, "MERGE_KEYS", 600)
    monkeypatch.setattr(compaction, "MIN_BUFFER", 50)
    reads, writes = [], []
    take = compaction.Stream.take

    def counting_take(self, count):
        out = take(self, count)
        reads.append(len(out))
        return out

    monkeypatch.setattr(compaction.Stream, "take", counting_take)
    merged = compaction.merged_chunks

    def counting_chunks(*a, **k):
        for file, chunk in merged(*a, **k):
            writes.append((file, len(chunk)))
            yield file, chunk

    monkeypatch.setattr(compaction, "merged_chunks", counting_chunks)
    got = compacted("small")
    assert {f: i["crc32"] for f, i in got["files"].items()} == {f: i["crc32"] for f, i in want["files"].items()}
    keys = len(split.a_texts) * Index(str(tmp_path / "big")).config.bands
    assert max(reads) <= 600 and len(reads) > keys // 600
    # a keys chunk holds the buffered keys (600 over all segments, 50 each at least) and no more
    # than one bucket of equal keys beyond them; the other chunks hold at most 256 values
    assert max(n for f, n in writes if f in ("keys.u64", "kdoc.u32")) <= 600 + 6 * 50
    # ... and the other chunks at most 256 values, or one document's (a chunk has one at least)
    seg = Index(str(tmp_path / "big"))
    entry = seg.storage.read_manifest()["segments"][0]
    largest = int(np.diff(np.asarray(seg.storage.open_segment(entry).array("fpoff.i64"))).max())
    assert largest > 256
    assert max(n for f, n in writes if f not in ("keys.u64", "kdoc.u32")) <= max(256, largest)


def test_remove_errors_are_one_line_and_change_nothing(tmp_path, split):
    path = str(tmp_path / "ix")
    build(path, split, parts=2)
    manifest = open(os.path.join(path, "manifest.json"), "rb").read()
    with pytest.raises(ConfigError, match=r"no source 'nope' \(its sources: 'part0', 'part1'\); nothing was removed"):
        Index(path).remove(source=["part0", "nope"])
    with pytest.raises(ConfigError, match="nothing to remove"):
        Index(path).remove()
    with pytest.raises(ConfigError, match="list of ids"):
        Index(path).remove(ids="a0")
    assert open(os.path.join(path, "manifest.json"), "rb").read() == manifest
    bad = tmp_path / "ids.txt"
    bad.write_bytes(b"a1\n\xff\xfe\n")
    with pytest.raises(InputError, match=r"ids.txt:2: not UTF-8"):
        from neardup.index.removal import read_ids_file
        read_ids_file(str(bad))
    p = run_process("index", "remove", path, "--ids", str(bad))
    assert p.returncode == 2 and p.stderr.strip().count("\n") == 0 and "ids.txt:2" in p.stderr
    # the process's exit status and its one line are checked above; the other messages in this process
    p = run_in_process("index", "remove", path)
    assert p.returncode == 2 and "--ids FILE or --source NAME" in p.stderr
    p = run_in_process("index", "remove", path, "--source", "nope")
    assert p.returncode == 2 and "no source 'nope'" in p.stderr and "Traceback" not in p.stderr
    assert open(os.path.join(path, "manifest.json"), "rb").read() == manifest


def test_cli_remove_by_ids_file_and_source(tmp_path, split):
    path = str(tmp_path / "ix")
    build(path, split, parts=3)
    ids = tmp_path / "takedown.txt"
    ids.write_text("\n".join(split.a_ids[:5]) + "\r\n\nunknown\n")
    p = run_in_process("index", "remove", path, "--ids", str(ids), "--source", "part2")  # what it removes and says
    assert p.returncode == 0, p.stderr
    assert "5 of 6 ids found" in p.stderr and "source part2" in p.stderr
    got = matched(Index(path).query(split.a_texts))
    assert not {i for i, s in got} & set(split.a_ids[:5]) and not {s for _, s in got} & {"part2"}


def test_an_estimate_index_removes_too(tmp_path, split):
    path = str(tmp_path / "ix")
    idx = Index(path, verify="estimate")
    idx.add(split.a_texts[:200], ids=split.a_ids[:200], name="A")
    idx.add(split.a_texts[200:], ids=split.a_ids[200:], name="B")
    before = idx.query(split.a_texts)
    idx.remove(ids=split.a_ids[:50])
    want = without(before, set(split.a_ids[:50]))
    assert Index(path).query(split.a_texts) == want
    Index(path).compact()
    assert Index(path).query(split.a_texts) == want


def test_a_reader_holding_the_old_manifest_sees_the_removal_after_its_refresh(tmp_path, split):
    path = str(tmp_path / "ix")
    build(path, split, parts=2)
    reader = Index(path, refresh=3600)
    before = reader.query(split.a_texts[:50])
    Index(path).remove(ids=split.a_ids[:10])
    assert reader.query(split.a_texts[:50]) == before  # its snapshot, as for an add
    reader._manifest_read = -1e18
    assert reader.query(split.a_texts[:50]) == without(before, set(split.a_ids[:10]))


# --------------------------------------------------------------------------- processes


REMOVE_SMALL = "import neardup.index.segments as s; s.MAX_SEGMENT_DOCS = 40"


def _writers(location, split, tmp_path):
    """Four writers at once: two add new sources, two remove (one a source, one ids)."""
    n = len(split.b_texts) // 2
    files = [write_jsonl(str(tmp_path / f"new{w}.jsonl"), split.b_texts[w * n:(w + 1) * n],
                         [f"new{w}-{i}" for i in range(n)]) for w in range(2)]
    ids = tmp_path / "ids.txt"
    ids.write_text("\n".join(split.a_ids[1::4]) + "\n")
    cmds = [cli("index", "add", location, files[w], "--name", f"new{w}", "--id-column", "id", "--batch-size", "10",
                setup=REMOVE_SMALL) for w in range(2)]
    cmds += [cli("index", "remove", location, "--source", "part0"), cli("index", "remove", location, "--ids", str(ids))]
    procs = [subprocess.Popen(c, env=env(), stderr=subprocess.PIPE) for c in cmds]
    for p in procs:
        assert p.wait(timeout=300) == 0, p.stderr.read().decode()
    return n, set(split.a_ids[1::4])


def check_writers(location, split, n, gone_ids):
    idx = Index(location)
    part0 = set(_part(split, 0, 4)[1])
    s = idx.stats()
    assert s["sources"]["new0"] == n and s["sources"]["new1"] == n and s["sources"]["part0"] == 0
    left = [i for i in split.a_ids if i not in gone_ids | part0]
    assert s["documents"] == 2 * n + len(left)
    for reader in (idx, None):
        if reader is None:
            Index(location).compact()
            reader = Index(location)
        got = reader.query(split.a_texts + split.b_texts[:2 * n])
        ids = {i for i, _ in matched(got)}
        assert not ids & (gone_ids | part0)
        assert set(left) <= ids  # each document left finds itself
        assert {f"new{w}-{i}" for w in range(2) for i in range(n)} <= ids


@pytest.mark.slow
def test_four_writers_adding_and_removing_at_once_on_a_folder_lose_nothing(tmp_path, split):
    ix = str(tmp_path / "ix")
    build(ix, split)
    n, gone = _writers(ix, split, tmp_path)
    check_writers(ix, split, n, gone)


@pytest.mark.slow
@pytest.mark.parametrize("point", ["segment_written", "before_manifest_switch", "after_manifest_switch"])
def test_a_kill_during_a_removal_leaves_the_index_as_before_or_as_after(tmp_path, split, point):
    ix = str(tmp_path / "ix")
    build(ix, split)
    probe = split.a_texts
    before = Index(ix).query(probe)
    manifest = open(os.path.join(ix, "manifest.json"), "rb").read()
    p = subprocess.run(cli("index", "remove", ix, "--source", "part3", crash_at=point), env=env(), capture_output=True)
    assert p.returncode == -signal.SIGKILL
    idx = Index(ix)
    want = without(before, gone_sources={"part3"})
    if point == "after_manifest_switch":
        assert idx.query(probe) == want
    else:
        assert open(os.path.join(ix, "manifest.json"), "rb").read() == manifest
        assert idx.query(probe) == before
    # the next removal cleans what the killed one left and removes once
    Index(ix).remove(source="part3")
    assert Index(ix).query(probe) == want
    named = set()
    for e in Index(ix).storage.read_manifest()["segments"]:
        named |= {e["name"]} | ({e["dead"]["name"]} if e.get("dead") else set())
    assert set(os.listdir(os.path.join(ix, "segments"))) == named


# --------------------------------------------------------------------------- redis

@pytest.fixture
def url(redis_url):
    return redis_url


@pytest.mark.slow
def test_removal_on_redis(url, split):
    import redis
    after, manifest = check_removal(url, split)
    keys = redis.Redis.from_url(url).keys("neardup:seg:*")
    assert {k.decode().split(":")[2] for k in keys} == {e["name"] for e in manifest["segments"]}


@pytest.mark.slow
def test_four_writers_adding_and_removing_at_once_on_redis_lose_nothing(url, split, tmp_path):
    build(url, split)
    n, gone = _writers(url, split, tmp_path)
    check_writers(url, split, n, gone)


@pytest.mark.slow
def test_a_kill_during_a_removal_on_redis_leaves_it_as_before(url, split):
    import redis
    build(url, split)
    before = Index(url).query(split.a_texts)
    manifest = redis.Redis.from_url(url).get("neardup:manifest")
    for point in ("segment_written", "before_manifest_switch"):
        p = subprocess.run(cli("index", "remove", url, "--source", "part3", crash_at=point), env=env(),
                           capture_output=True)
        assert p.returncode == -signal.SIGKILL
        assert redis.Redis.from_url(url).get("neardup:manifest") == manifest
        assert Index(url).query(split.a_texts) == before
    p = run_in_process("index", "remove", url, "--source", "part3")  # the rerun needs no process
    assert p.returncode == 0, p.stderr
    assert Index(url).query(split.a_texts) == without(before, gone_sources={"part3"})


# --------------------------------------------------------------------------- truncated buckets


def test_truncated_buckets_are_counted_and_reported_where_they_happen(tmp_path, monkeypatch, capsys):
    """Five copies of a text in one segment and MAX_BUCKET 2: each of the 13 band lookups of a
    query of that text is cut (3 candidates unverified each); the query, the CLI and a dedup
    --against run say so."""
    import json

    from neardup.cli import main
    from neardup.index import core
    text = " ".join(f"w{i}" for i in range(60))
    path = str(tmp_path / "ix")
    idx = Index(path)
    idx.add([text] * 5 + ["something else entirely " * 5], name="A")
    monkeypatch.setattr(core, "MAX_BUCKET", 2)
    keys = idx.hash_texts([text])
    m = idx.match(keys["keys"], shingles=(keys["fp_offsets"], keys["fp"]))
    bands = idx.config.bands
    assert (m.truncated_buckets, m.truncated, m.candidates) == (bands, 3 * bands, 2)
    assert idx.counts == {"candidates": 2, "truncated_buckets": bands, "truncated_candidates": 3 * bands}
    q = tmp_path / "q.jsonl"
    q.write_text(json.dumps({"text": text}) + "\n" + json.dumps({"text": "unrelated words here and there"}) + "\n")
    assert main(["index", "query", path, str(q)]) == 0
    err = capsys.readouterr().err
    assert f"{bands} band buckets held more than 2 documents a segment; {3 * bands} candidates" in err
    assert "recall against it falls" not in err
    assert main(["index", "query", path, str(q), "--threshold", "0.7"]) == 0  # below the index's 0.8
    assert "18 bands x 7 rows: a pair at similarity 0.7 becomes a candidate with probability 0.787" in \
        capsys.readouterr().err
    assert main(["dedup", str(q), "-o", str(tmp_path / "out"), "--against", path]) == 0
    err = capsys.readouterr().err
    stats = json.loads((tmp_path / "out" / "stats.json").read_text())
    (ix,) = stats["indexes"]
    assert (ix["truncated_buckets"], ix["truncated_candidates"], ix["matched"], ix["max_bucket"]) == (bands, 3 * bands, 1, 2)
    assert "warning: index" in err and f"{bands} band buckets held more than 2" in err
    monkeypatch.setattr(core, "MAX_BUCKET", 5)  # a bucket of exactly the bound is not cut
    assert Index(path).match(keys["keys"], shingles=(keys["fp_offsets"], keys["fp"])).truncated_buckets == 0


def test_a_source_name_ending_in_a_slash_names_every_source_in_that_folder(tmp_path, split):
    path = str(tmp_path / "ix")
    idx = Index(path)
    for name, k in (("dump2/a.jsonl", 0), ("dump2/b.jsonl", 1), ("dump20/c.jsonl", 2), ("dump2", 3)):
        idx.add(split.a_texts[k * 50:(k + 1) * 50], ids=split.a_ids[k * 50:(k + 1) * 50], name=name)
    assert idx.remove(source="dump2/")["removed"] == 100
    assert Index(path).stats()["sources"] == {"dump2/a.jsonl": 0, "dump2/b.jsonl": 0, "dump20/c.jsonl": 50, "dump2": 50}
    with pytest.raises(ConfigError, match="no source 'dump3/'"):
        idx.remove(source="dump3/")


def test_compaction_orders_equal_keys_across_segments_as_one_add_would(tmp_path, split, monkeypatch):
    """Copies of three texts in every segment (buckets of equal keys spanning the segments) and
    buffers of a few keys: equal keys come out in document order, as in the segment one add of
    the same documents writes."""
    monkeypatch.setattr(compaction, "MERGE_KEYS", 40)
    monkeypatch.setattr(compaction, "MIN_BUFFER", 7)
    texts = split.a_texts[:3] * 10
    docs = []
    idx = Index(str(tmp_path / "ix"))
    for k in range(5):
        part = texts + split.a_texts[3 + 20 * k:23 + 20 * k]
        ids = [f"{k}-{i}" for i in range(len(part))]
        idx.add(part, ids=ids, name="A")
        docs += list(zip(part, ids))
    idx.compact()
    one = Index(str(tmp_path / "one"))
    one.add([t for t, _ in docs], ids=[i for _, i in docs], name="A")
    (a,) = idx.storage.read_manifest()["segments"]
    (b,) = one.storage.read_manifest()["segments"]
    assert {f: i["crc32"] for f, i in a["files"].items()} == {f: i["crc32"] for f, i in b["files"].items()}


@pytest.mark.slow
def test_a_removal_racing_another_on_redis_starts_over_and_loses_neither(url, split, monkeypatch):
    """Another process removes other documents of the same segment between this removal's
    reading and its switch: this one reads the index again (never writing its stale
    tombstone over the other's), and both removals hold."""
    from neardup.index import removal
    build(url, split)
    seg1 = _part(split, 1, 4)[1]
    mine, theirs = seg1[:10], seg1[10:20]
    write = removal._write_tombstones
    raced = []

    def racing(storage, manifest, todo):
        out = write(storage, manifest, todo)
        if not raced:
            raced.append(True)
            Index(url).remove(ids=theirs)  # commits first
        return out

    monkeypatch.setattr(removal, "_write_tombstones", racing)
    r = Index(url).remove(ids=mine)
    assert raced and r["removed"] == 10
    ids = {i for i, _ in matched(Index(url).query(split.a_texts))}
    assert not ids & set(mine + theirs) and set(seg1[20:]) <= ids
    assert Index(url).stats()["removed"] == 20


def _files(path):
    return sorted(os.path.relpath(os.path.join(d, f), path) for d, _, fs in os.walk(path) for f in fs
                  if not f.startswith(".neardup") and f != "lock")


@pytest.mark.parametrize("kind", ["plain", "bloom"])
def test_a_removal_the_index_changed_under_is_started_over_then_given_up(tmp_path, split, monkeypatch, kind):
    """Another writer's change found at the commit (_Changed): the removal undoes its writes and
    starts over (twice here, then it goes through: the result of a removal never interrupted);
    ATTEMPTS times in a row, a StorageError, the index as it was. For the id index's tombstones
    and a bloom index's dropped segments alike (removal._retried). Mutation: ``continue`` ->
    ``break`` in _retried -> no result (or no error)."""
    from neardup.errors import StorageError
    from neardup.index import removal

    options = {} if kind == "plain" else dict(kind="bloom")
    paths = {}
    for name in ("calm", "changed", "always"):
        paths[name] = str(tmp_path / name)
        idx = Index(paths[name], **options)
        idx.add(split.a_texts[:100], ids=split.a_ids[:100], name="A")
        idx.add(split.a_texts[100:200], ids=split.a_ids[100:200], name="B")
    what = dict(source="B") if kind == "bloom" else dict(ids=split.a_ids[::7][:20], source="B")
    want = Index(paths["calm"]).remove(**what)
    for name, changes in (("changed", 2), ("always", removal.ATTEMPTS)):
        idx = Index(paths[name])
        before = (open(os.path.join(paths[name], "manifest.json"), "rb").read(), _files(paths[name]))
        commit, left = idx.storage.commit, [changes]

        def changed(update, commit=commit, left=left):
            if left[0]:
                left[0] -= 1
                raise removal._Changed()
            return commit(update)

        monkeypatch.setattr(idx.storage, "commit", changed)
        if changes < removal.ATTEMPTS:
            got = idx.remove(**what)
            assert {k: v for k, v in got.items() if k != "seconds"} == \
                {k: v for k, v in want.items() if k != "seconds"} and left == [0]
            assert len(_files(paths[name])) == len(_files(paths["calm"]))  # no tombstone of an attempt left
        else:
            with pytest.raises(StorageError, match=rf"kept changing under the removal \({changes} attempts\)"):
                idx.remove(**what)
            assert (open(os.path.join(paths[name], "manifest.json"), "rb").read(), _files(paths[name])) == before
