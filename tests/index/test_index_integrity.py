"""What the index owns and what it refuses: a folder without its manifest, foreign files, damaged
segments (checksums), the writers' lock after a failed first add, parameters an existing index
cannot honour, locations that are not indexes, the query's output file, credentials, and a
full, read-only or misplaced folder. Each refusal is one line (exit 2) and changes nothing."""

import ctypes
import os
import shutil
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

from neardup.cli import main
from neardup.errors import ConfigError, StorageError
from neardup.index import Index
from neardup.index.storage import FolderStorage

from helpers import child_env as env, neardup_command as cli, run_in_process, write_jsonl
from index_corpus import make_split

EXACT_FILES = ("keys.u64", "kdoc.u32", "fpoff.i64", "fp.u32", "fp.crc", "idoff.i64", "id.bin", "src.u32")
BY_BLOCKS = ("fp.u32", "sig.u32")  # checked block by block: a query checks the blocks it reads


@pytest.fixture(scope="module")
def split():
    return make_split(240, seed=5)


@pytest.fixture(scope="module")
def a_file(tmp_path_factory, split):
    return write_jsonl(str(tmp_path_factory.mktemp("in") / "a.jsonl"), split.a_texts, split.a_ids)


def one_line(capsys, rc, *needles):
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert rc == 2, err
    assert len(lines) == 1 and lines[0].startswith("neardup: error: "), err
    for n in needles:
        assert n in lines[0], err
    return lines[0]


def tree(path):
    """{relative path: bytes} of every file under path (a snapshot to compare)."""
    out = {}
    for root, dirs, files in os.walk(path):
        for f in files:
            p = os.path.join(root, f)
            with open(p, "rb") as fh:
                out[os.path.relpath(p, path)] = fh.read()
        for d in dirs:
            out.setdefault(os.path.relpath(os.path.join(root, d), path) + "/", b"")
    return out


def segment_dirs(ix):
    return sorted(os.listdir(os.path.join(ix, "segments")))


def build(path, split, parts=1, **options):
    idx = Index(str(path), **options)
    n = len(split.a_texts)
    for k in range(parts):
        lo, hi = k * n // parts, (k + 1) * n // parts
        idx.add(split.a_texts[lo:hi], ids=split.a_ids[lo:hi], name=f"A{k}")
    return str(path)


# ----------------------------------------------------------------------------- 1. ownership

def test_segments_without_a_manifest_are_refused_and_never_deleted(tmp_path, split, a_file, capsys):
    ix = build(tmp_path / "ix", split, parts=2)
    os.remove(os.path.join(ix, "manifest.json"))
    before = tree(ix)
    line = one_line(capsys, main(["index", "add", ix, a_file]), ix, "manifest.json", "2 segments", "nothing was changed")
    assert "restore" in line
    assert tree(ix) == before
    for argv in (["index", "query", ix, a_file], ["index", "stats", ix], ["index", "compact", ix],
                 ["index", "verify", ix]):
        one_line(capsys, main(argv), "lost its manifest.json")
    with pytest.raises(StorageError, match="lost its manifest.json"):
        Index(ix)
    assert tree(ix) == before


@pytest.mark.parametrize("layout", ["top", "in-segments"])
def test_a_folder_holding_other_files_is_refused_and_left_alone(tmp_path, a_file, capsys, layout):
    folder = tmp_path / "mine"
    (folder / "segments" if layout == "in-segments" else folder).mkdir(parents=True)
    (folder / ("segments/notes.txt" if layout == "in-segments" else "notes.txt")).write_text("keep me")
    before = tree(folder)
    one_line(capsys, main(["index", "add", str(folder), a_file]), str(folder), "not a neardup index", "notes.txt")
    assert tree(folder) == before
    with pytest.raises(StorageError, match="not a neardup index"):
        with FolderStorage(str(folder)).writer():
            pass
    assert tree(folder) == before


def test_cleanup_removes_only_what_the_index_names_or_its_own_temporaries(tmp_path, split):
    ix = build(tmp_path / "ix", split, parts=2)
    seg = os.path.join(ix, "segments")
    named = segment_dirs(ix)
    # what a killed writer leaves: a renamed segment no manifest names, a half-written one
    shutil.copytree(os.path.join(seg, named[0]), os.path.join(seg, "20000101T000000-0123456789ab"))
    shutil.copytree(os.path.join(seg, named[0]), os.path.join(seg, ".tmp-20000101T000000-ba9876543210"))
    # what is not the index's: a file and a folder of the user's, a file inside a segment folder
    with open(os.path.join(seg, "README"), "w") as f:
        f.write("mine")
    os.makedirs(os.path.join(seg, "backup"))
    with open(os.path.join(seg, "backup", "keys.u64"), "wb") as f:
        f.write(b"12345678")
    with open(os.path.join(ix, "notes.txt"), "w") as f:
        f.write("mine")
    Index(ix).add(split.b_texts[:5], name="B")
    left = set(segment_dirs(ix))
    assert "20000101T000000-0123456789ab" not in left and ".tmp-20000101T000000-ba9876543210" not in left
    assert {"README", "backup"} <= left and os.path.exists(os.path.join(seg, "backup", "keys.u64"))
    assert os.path.exists(os.path.join(ix, "notes.txt"))
    # compaction removes the merged segments' own files, not a file someone put beside them
    with open(os.path.join(seg, named[0], "mine.txt"), "w") as f:
        f.write("mine")
    Index(ix).compact()
    assert os.listdir(os.path.join(seg, named[0])) == ["mine.txt"]
    assert {"README", "backup"} <= set(segment_dirs(ix))
    assert Index(ix).stats()["documents"] == len(split.a_texts) + 5


@pytest.mark.slow
@pytest.mark.parametrize("point", ["segment_written", "before_manifest_switch"])
def test_a_killed_first_add_is_recovered_by_the_next_add(tmp_path, split, a_file, point):
    """A first add killed after writing a segment leaves an index the next add can use (its
    manifest is written first), not a folder of segments without a manifest."""
    ix = str(tmp_path / "ix")
    p = subprocess.run(cli("index", "add", ix, a_file, "--id-column", "id", crash_at=point), env=env(),
                       capture_output=True)
    assert p.returncode == -signal.SIGKILL
    assert Index(ix).stats()["documents"] == 0
    Index(ix).add(split.b_texts[:5], name="B")
    assert Index(ix).stats()["documents"] == 5
    assert len(segment_dirs(ix)) == 1


# ----------------------------------------------------------------------------- 2. damage

def flip(path, offset=None):
    """Eight bytes inverted in the middle of the file (or at ``offset``); in every 4 KiB block
    of a file checked by blocks, so that any query that reads it reads a damaged block."""
    with open(path, "r+b") as f:
        data = bytearray(f.read())
        if offset is None and os.path.basename(path) in BY_BLOCKS:
            starts = range(0, len(data), 4096)
        else:
            starts = [len(data) // 2 if offset is None else offset]
        for at in starts:
            for i in range(at, min(at + 8, len(data))):
                data[i] ^= 0xFF
        f.seek(0)
        f.write(bytes(data))


@pytest.mark.parametrize("file", EXACT_FILES)
def test_a_damaged_segment_file_is_one_line_never_a_wrong_answer(tmp_path, split, a_file, capsys, file):
    ix = build(tmp_path / "ix", split, parts=2)
    first = Index(ix).storage.read_manifest()["segments"][0]["name"]
    path = os.path.join(ix, "segments", first, file)
    original = open(path, "rb").read()
    assert main(["index", "verify", ix]) == 0
    assert "sound" in capsys.readouterr().out
    flip(path)
    manifest = open(os.path.join(ix, "manifest.json"), "rb").read()
    one_line(capsys, main(["index", "query", ix, a_file]), first, file)
    with pytest.raises(StorageError, match=f"segment {first} file {file}"):
        Index(ix).query(split.a_texts[:60])
    rc = main(["index", "verify", ix])
    out, err = capsys.readouterr()
    assert rc == 2 and err.startswith("neardup: error: ") and len(err.strip().splitlines()) == 1, err
    problems = out.strip().splitlines()
    assert len(problems) == 1 and first in problems[0] and file in problems[0], out
    one_line(capsys, main(["index", "compact", ix]), first, file)
    assert open(os.path.join(ix, "manifest.json"), "rb").read() == manifest  # nothing rewritten
    open(path, "wb").write(original)
    assert main(["index", "verify", ix]) == 0


def test_damaged_keys_do_not_turn_matches_into_none(tmp_path, split, a_file, capsys):
    ix = build(tmp_path / "ix", split)
    seg = segment_dirs(ix)[0]
    path = os.path.join(ix, "segments", seg, "keys.u64")
    data = bytearray(open(path, "rb").read())
    for i in range(0, len(data), 8):  # every key's high byte
        data[i + 7] ^= 0x40
    open(path, "wb").write(bytes(data))
    one_line(capsys, main(["index", "query", ix, a_file]), seg, "keys.u64", "checksum")


def test_estimate_signatures_are_checked_too(tmp_path, split, capsys):
    ix = build(tmp_path / "ix", split, verify="estimate")
    seg = segment_dirs(ix)[0]
    flip(os.path.join(ix, "segments", seg, "sig.u32"))
    with pytest.raises(StorageError, match=f"segment {seg} file sig.u32"):
        Index(ix).query(split.a_texts[:30])
    assert main(["index", "verify", ix]) == 2
    assert "sig.u32" in capsys.readouterr().out


def test_a_query_checks_the_fingerprint_blocks_it_reads_and_only_those(tmp_path, split, capsys):
    """One damaged 4 KiB block of fingerprints: a query that reads it fails in one line naming
    the bytes; queries that do not read it answer exactly as before (the other 13 GB of a
    10M-document index are not read to check them); verify finds it."""
    ix = build(tmp_path / "ix", split)
    seg = segment_dirs(ix)[0]
    texts = split.a_texts[:40]
    before = Index(ix).query(texts)
    assert all(split.a_ids[i] in [m.id for m in ms] for i, ms in enumerate(before))  # each text finds itself
    from neardup.index import storage as folder_storage
    folder_storage._VERIFIED.clear(), folder_storage._VERIFIED_BLOCKS.clear()
    fpoff = np.fromfile(os.path.join(ix, "segments", seg, "fpoff.i64"), dtype=np.int64)
    last = len(fpoff) - 2  # the index's last document: its fingerprints end the file
    block = int(fpoff[last] * 4) // 4096
    assert int(fpoff[40] * 4) // 4096 < block, "the test's corpus is too small for the first 40 and the last to differ in blocks"
    flip(os.path.join(ix, "segments", seg, "fp.u32"), offset=block * 4096)
    assert Index(ix).query(texts) == before
    with pytest.raises(StorageError, match=f"segment {seg} file fp.u32 bytes {block * 4096}-"):
        Index(ix).query([split.a_texts[last]])
    assert main(["index", "verify", ix]) == 2
    assert "fp.u32" in capsys.readouterr().out


@pytest.mark.parametrize("damage", ["missing", "truncated"])
def test_index_add_refuses_a_missing_or_truncated_segment_file(tmp_path, split, a_file, capsys, damage):
    ix = build(tmp_path / "ix", split)
    seg = segment_dirs(ix)[0]
    path = os.path.join(ix, "segments", seg, "fp.u32")
    if damage == "missing":
        os.remove(path)
    else:
        with open(path, "r+b") as f:
            f.truncate(100)
    before = tree(ix)
    one_line(capsys, main(["index", "add", ix, a_file]), seg, "fp.u32")
    assert tree(ix) == before


def test_verify_reports_a_segment_whose_arrays_disagree(tmp_path, split, capsys):
    """Checksums that match but arrays that contradict each other (what a bug could write)."""
    ix = build(tmp_path / "ix", split)
    idx = Index(ix)
    entry = idx.storage.read_manifest()["segments"][0]
    arrays = {f: np.array(idx.storage.open_segment(entry).array(f)) for f in entry["files"] if not f.endswith(".crc")}
    arrays["src.u32"][3] = 7  # a source number the segment does not have
    from neardup.index.writer import write_entry
    bad = write_entry(idx.storage, arrays, entry["sources"])
    idx.storage.commit(lambda m: dict(m, generation=m["generation"] + 1, segments=m["segments"] + [bad]))
    assert main(["index", "verify", ix]) == 2
    out = capsys.readouterr().out
    assert bad["name"] in out and "src.u32" in out


def test_verify_reports_block_checksums_that_disagree_with_their_data(tmp_path, split, capsys):
    """A fp.crc that matches the manifest's checksum but not the blocks of fp.u32."""
    import zlib
    ix = build(tmp_path / "ix", split)
    idx = Index(ix)
    entry = idx.storage.read_manifest()["segments"][0]
    path = os.path.join(ix, "segments", entry["name"], "fp.crc")
    sums = np.fromfile(path, dtype=np.uint32)
    assert len(sums) >= 2
    sums[1] ^= 1
    sums.tofile(path)
    files = dict(entry["files"], **{"fp.crc": {"bytes": sums.nbytes, "crc32": zlib.crc32(sums.tobytes())}})
    idx.storage.commit(lambda m: dict(m, generation=m["generation"] + 1,
                                      segments=[dict(m["segments"][0], files=files)] + m["segments"][1:]))
    assert main(["index", "verify", ix]) == 2
    out = capsys.readouterr().out
    assert entry["name"] in out and "fp.crc" in out and "block checksums" in out, out


# ----------------------------------------------------------------------------- 3. the lock

WAITING_WRITER = """
import os, sys, time
import neardup.index.storage as st
original = st.FolderStorage.write_segment
def write_segment(self, name, arrays):
    files = original(self, name, arrays)
    open(sys.argv[1], "w").close()                 # written, not yet committed
    deadline = time.time() + 120
    while not os.path.exists(sys.argv[2]) and time.time() < deadline:
        time.sleep(0.02)
    return files
st.FolderStorage.write_segment = write_segment
from neardup.cli import main
sys.exit(main(sys.argv[3:]))
"""


def waiting_for_lock(pid, path):
    """Whether process pid waits for the flock of path (a blocked entry of /proc/locks)."""
    ino = os.stat(path).st_ino
    with open("/proc/locks") as f:
        for line in f:
            parts = line.split()
            if "->" in parts and parts[parts.index("->") + 4] == str(pid) and parts[parts.index("->") + 5].endswith(f":{ino}"):
                return True
    return False


def wait_until(cond, what, timeout=120):
    deadline = time.time() + timeout
    while not cond():
        if time.time() > deadline:
            pytest.fail(f"timed out waiting for {what}")
        time.sleep(0.02)


@pytest.mark.slow
@pytest.mark.skipif(not os.path.exists("/proc/locks"), reason="needs Linux's /proc/locks to see a waiting writer")
def test_after_a_failed_first_add_writers_still_take_turns(tmp_path, split):
    """A first add fails while writer B waits for the lock; B then writes; newcomer C must wait
    for B (the lock file survived the failed add's cleanup) and both adds are kept."""
    ix = str(tmp_path / "ix")
    b = write_jsonl(str(tmp_path / "b.jsonl"), split.b_texts[:40], [f"b{i}" for i in range(40)])
    c = write_jsonl(str(tmp_path / "c.jsonl"), split.b_texts[40:80], [f"c{i}" for i in range(40)])
    written, go = str(tmp_path / "written"), str(tmp_path / "go")
    first = Index(ix)
    with pytest.raises(RuntimeError):
        with first.writer() as w:
            w.add(split.a_texts[:10], name="A")
            proc_b = subprocess.Popen([sys.executable, "-c", WAITING_WRITER, written, go, "index", "add", ix, b,
                                       "--id-column", "id", "--name", "B"], env=env(), stderr=subprocess.PIPE)
            wait_until(lambda: waiting_for_lock(proc_b.pid, os.path.join(ix, ".lock")) or proc_b.poll() is not None,
                       "writer B to wait for the lock")
            raise RuntimeError("the first add fails")
    assert os.path.exists(os.path.join(ix, ".lock"))
    wait_until(lambda: os.path.exists(written) or proc_b.poll() is not None, "writer B to write its segment")
    assert proc_b.poll() is None, proc_b.stderr.read().decode()
    proc_c = subprocess.Popen(cli("index", "add", ix, c, "--id-column", "id", "--name", "C"), env=env(),
                              stderr=subprocess.PIPE)
    wait_until(lambda: waiting_for_lock(proc_c.pid, os.path.join(ix, ".lock")) or proc_c.poll() is not None,
               "writer C to wait for the lock")
    c_waited = proc_c.poll() is None
    open(go, "w").close()
    assert proc_b.wait(timeout=120) == 0, proc_b.stderr.read().decode()
    assert proc_c.wait(timeout=120) == 0, proc_c.stderr.read().decode()
    assert c_waited, "writer C did not wait for writer B"
    idx = Index(ix)
    assert idx.stats()["sources"] == {"B": 40, "C": 40}
    res = idx.query(split.b_texts[:80])
    assert all(any(m.id == want for m in r) for r, want in zip(res, [f"b{i}" for i in range(40)] + [f"c{i}" for i in range(40)]))


def test_a_failed_first_add_leaves_no_index_but_keeps_the_lock(tmp_path, split):
    ix = str(tmp_path / "new")
    with pytest.raises(ConfigError):
        Index(ix).add(split.a_texts[:3], ids=["x"], name="A")
    assert os.listdir(ix) == [".lock"]
    with pytest.raises(StorageError, match="no index at"):
        Index(ix, must_exist=True)
    Index(ix, ngram=3).add(split.a_texts[:3], name="A")  # a new index: any parameters
    assert Index(ix).params["ngram"] == 3


# ----------------------------------------------------------------------------- 4. --verify

def test_verify_option_that_an_existing_index_cannot_honour_is_refused(tmp_path, split, a_file, capsys):
    ix = build(tmp_path / "ix", split)
    before = tree(ix)
    one_line(capsys, main(["index", "add", ix, a_file, "--verify", "estimate"]), ix, "--verify estimate", "exact")
    assert tree(ix) == before
    with pytest.raises(ConfigError, match="verify"):
        Index(ix, verify="estimate")
    assert Index(ix, verify="exact").store == "exact"
    est = build(tmp_path / "est", split, verify="estimate")
    with pytest.raises(ConfigError, match="verify"):
        Index(est, verify="exact")
    assert Index(est, verify="none").store == "estimate"


# ----------------------------------------------------------------------------- 5, 6. locations

@pytest.mark.parametrize("url, needle", [
    ("redis://127.0.0.1:6379/abc", "database"),
    ("redis://127.0.0.1:6379/1/2", "database"),
    ("redis://127.0.0.1:6379/0?db=3", "db"),
    ("redis://127.0.0.1:6379/0?ssl_cert_reqs=none", "ssl_cert_reqs"),
    ("redis://127.0.0.1:notaport/0", "port"),
])
def test_a_bad_redis_url_is_refused_before_connecting(url, needle, capsys, a_file):
    t0 = time.time()
    with pytest.raises(StorageError, match=needle):
        Index(url)
    one_line(capsys, main(["index", "add", url, a_file]), needle)
    assert time.time() - t0 < 3


@pytest.mark.parametrize("url", ["s3://bucket/x", "gs://bucket/x", "https://host/x", "hf://datasets/x",
                                 "simplecache::s3://bucket/x"])
def test_an_object_storage_url_is_refused_never_a_local_folder(tmp_path, monkeypatch, capsys, a_file, url):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(StorageError, match="redis://"):
        Index(url)
    one_line(capsys, main(["index", "add", url, a_file]), "local folder", "redis://")
    one_line(capsys, main(["index", "query", url, a_file]), "local folder")
    assert os.listdir(tmp_path) == []


def test_a_file_url_is_a_local_folder(tmp_path, monkeypatch, split):
    monkeypatch.chdir(tmp_path)  # were it taken for a relative path, it would land here
    ix = tmp_path / "ix"
    Index(f"file://{ix}").add(split.a_texts[:5], name="A")
    assert Index(str(ix)).stats()["documents"] == 5
    assert sorted(os.listdir(tmp_path)) == ["ix"]


# ----------------------------------------------------------------------------- 7. query -o

def test_query_output_never_overwrites_an_input_or_an_existing_file(tmp_path, split, a_file, capsys):
    ix = build(tmp_path / "ix", split)
    data = open(a_file, "rb").read()
    os.makedirs(tmp_path / "in")
    inp = str(tmp_path / "in" / "q.jsonl")
    shutil.copy(a_file, inp)
    for flags in ([], ["--overwrite"]):
        one_line(capsys, main(["index", "query", ix, inp, "-o", inp, *flags]), inp, "input")
        os.symlink(inp, str(tmp_path / "link.jsonl"))
        one_line(capsys, main(["index", "query", ix, inp, "-o", str(tmp_path / "link.jsonl"), *flags]), "input")
        os.remove(str(tmp_path / "link.jsonl"))
        one_line(capsys, main(["index", "query", ix, str(tmp_path / "in"), "-o", inp, *flags]), "input")  # a folder input
        assert open(inp, "rb").read() == data
    other = str(tmp_path / "old.jsonl")
    open(other, "w").write("precious\n")
    one_line(capsys, main(["index", "query", ix, inp, "-o", other]), other, "--overwrite")
    assert open(other).read() == "precious\n"
    assert main(["index", "query", ix, inp, "-o", other, "--overwrite"]) == 0
    assert len(open(other).read().splitlines()) == len(split.a_texts)
    new = str(tmp_path / "new.parquet")
    assert main(["index", "query", ix, inp, "-o", new]) == 0
    capsys.readouterr()
    os.makedirs(tmp_path / "adir.jsonl")
    one_line(capsys, main(["index", "query", ix, inp, "-o", str(tmp_path / "adir.jsonl"), "--overwrite"]), "folder")
    one_line(capsys, main(["index", "query", ix, inp, "-o", str(tmp_path / "nodir" / "x.jsonl")]), "nodir")
    assert sorted(os.listdir(tmp_path)) == ["adir.jsonl", "in", "ix", "new.parquet", "old.jsonl"]


# ----------------------------------------------------------------------------- 8. credentials

def test_credentials_are_never_printed_or_stored(tmp_path, split, a_file, capsys):
    url = "redis://:s3cret@127.0.0.1:1/0"
    for argv in (["index", "add", url, a_file], ["index", "query", url, a_file], ["index", "stats", url],
                 ["index", "verify", url], ["index", "add", "redis://:s3cret@127.0.0.1:1/x", a_file]):
        line = one_line(capsys, main(argv))
        assert "s3cret" not in line and "***" in line, line
    for bad in ("s3://key:s3cret@bucket/x", "redis://:s3cret@127.0.0.1:1/0", "redis://u:s3cret@127.0.0.1:1/x",
                "redis://u:s3cret@127.0.0.1:1/0?db=2", "rediss://:s3cret@127.0.0.1:1/0"):
        with pytest.raises(StorageError) as e:
            Index(bad)  # the API's messages, not only the command line's
        assert "s3cret" not in str(e.value) and "***@127.0.0.1" in str(e.value) or bad.startswith("s3"), str(e.value)
        assert "s3cret" not in str(e.value)
    ix = str(tmp_path / "ix")
    Index(ix).add(split.a_texts[:5], name="https://user:s3cret@example.com/dump.jsonl")
    assert "s3cret" not in open(os.path.join(ix, "manifest.json")).read()
    assert Index(ix).stats()["sources"] == {"https://user:***@example.com/dump.jsonl": 5}
    assert Index(ix).query(split.a_texts[:1])[0][0].source == "https://user:***@example.com/dump.jsonl"


# ----------------------------------------------------------------------------- 9. environment

def no_temporaries(ix):
    left = [p for p in tree(ix) if ".tmp" in p]
    assert left == [], left


def test_index_path_under_a_file_is_one_line(tmp_path, a_file, capsys):
    f = tmp_path / "afile"
    f.write_text("x")
    with pytest.raises(StorageError, match="a part of the path is a file"):
        Index(str(f / "ix")).add(["one two three four five six"])
    one_line(capsys, main(["index", "add", str(f / "ix"), a_file]), str(f / "ix"), "Not a directory")
    one_line(capsys, main(["index", "add", str(f), a_file]), str(f), "not a neardup index")
    one_line(capsys, main(["index", "query", str(f / "ix"), a_file]), str(f / "ix"))
    assert f.read_text() == "x"


def _drop_dac_override():  # root ignores file permissions unless it gives up CAP_DAC_OVERRIDE
    libc = ctypes.CDLL(None, use_errno=True)
    for cap in (1, 2):  # CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH
        libc.prctl(24, cap, 0, 0, 0)  # PR_CAPBSET_DROP: gone from the exec'd process


@pytest.mark.slow
@pytest.mark.parametrize("when", ["new", "existing"])
def test_a_folder_not_writable_is_one_line_and_leaves_nothing(tmp_path, split, a_file, when):
    parent = tmp_path / "ro"
    parent.mkdir()
    ix = str(parent / "ix")
    if when == "existing":
        build(ix, split)
        os.chmod(ix, 0o555)
        os.chmod(os.path.join(ix, "segments"), 0o555)
    os.chmod(parent, 0o555)
    before = tree(parent)
    try:
        p = subprocess.run(cli("index", "add", ix, a_file), env=env(), capture_output=True, text=True,
                           preexec_fn=_drop_dac_override if os.geteuid() == 0 else None)
    finally:
        for d in (parent, ix, os.path.join(ix, "segments")):
            if os.path.exists(d):
                os.chmod(d, 0o755)
    lines = p.stderr.strip().splitlines()
    assert p.returncode == 2 and len(lines) == 1, p.stderr
    assert "Permission denied" in lines[0] and ix in lines[0], p.stderr
    assert tree(parent) == before


def _capped(limit=4096):
    def cap():
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        import resource
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
    return cap


_ignore_sigxfsz = _capped(4096)


@pytest.mark.slow
def test_a_write_that_fails_midway_is_one_line_and_leaves_no_temporaries(tmp_path, split, a_file):
    """Files capped at 4 KiB (RLIMIT_FSIZE: EFBIG where a full disk gives ENOSPC, same path)."""
    ix = build(tmp_path / "ix", split)
    # the same add once without the cap, so that no compiled kernel's cache is written under it
    warm = build(tmp_path / "warm", split)
    # the file's positions as ids (--id-column ''): its own ids are the index's already, refused
    assert run_in_process("index", "add", warm, a_file, "--id-column", "").returncode == 0
    before = tree(ix)
    p = subprocess.run(cli("index", "add", ix, a_file, "--id-column", ""), env=env(), capture_output=True, text=True,
                       preexec_fn=_ignore_sigxfsz)
    lines = p.stderr.strip().splitlines()
    assert p.returncode == 2 and len(lines) == 1 and f"cannot write index {ix}: File too large" in lines[0], p.stderr
    assert tree(ix) == before


@pytest.mark.slow
def test_a_manifest_that_cannot_be_written_leaves_the_index_as_it_was(tmp_path, split):
    """Segment files under the cap, the manifest over it: the switch fails, its temporary and
    the new segment are removed, the old manifest stays."""
    ix = build(tmp_path / "ix", split, parts=4)
    assert os.path.getsize(os.path.join(ix, "manifest.json")) > 2048
    tiny = write_jsonl(str(tmp_path / "tiny.jsonl"), ["one two three four five six seven"], ["t"])
    assert run_in_process("index", "add", build(tmp_path / "warm", split), tiny).returncode == 0
    before = tree(ix)
    p = subprocess.run(cli("index", "add", ix, tiny), env=env(), capture_output=True, text=True,
                       preexec_fn=_capped(2048))
    lines = p.stderr.strip().splitlines()
    assert p.returncode == 2 and len(lines) == 1 and f"cannot write index {ix}: File too large" in lines[0], p.stderr
    assert tree(ix) == before


@pytest.mark.slow
def test_a_query_output_that_cannot_be_written_leaves_nothing(tmp_path, split, a_file):
    ix = build(tmp_path / "ix", split)
    out = tmp_path / "out"
    out.mkdir()
    assert run_in_process("index", "query", ix, a_file).returncode == 0  # the kernels compiled and cached first
    p = subprocess.run(cli("index", "query", ix, a_file, "-o", str(out / "m.jsonl")), env=env(), capture_output=True,
                       text=True, preexec_fn=_ignore_sigxfsz)
    lines = p.stderr.strip().splitlines()
    assert p.returncode == 2 and len(lines) == 1 and "File too large" in lines[0] and "m.jsonl" in lines[0], p.stderr
    assert os.listdir(out) == []


def _can_mount_tmpfs(where):
    try:
        return subprocess.run(["unshare", "-m", "sh", "-c", f"mount -t tmpfs -o size=64k none {where}"],
                              capture_output=True).returncode == 0
    except OSError:
        return False


@pytest.mark.slow
def test_a_full_disk_is_one_line_and_leaves_no_temporaries(tmp_path, split, a_file):
    """A real full file system: a 200 KiB tmpfs in a mount namespace of its own."""
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    if not _can_mount_tmpfs(str(mnt)):
        pytest.skip("cannot mount a tmpfs here (needs unshare -m and CAP_SYS_ADMIN)")
    small = write_jsonl(str(tmp_path / "small.jsonl"), split.a_texts[:5], split.a_ids[:5])
    big = " ".join(shutil.copy(a_file, str(tmp_path / f"big{k}.jsonl")) for k in range(3))
    py = " ".join(cli())
    script = (f"mount -t tmpfs -o size=200k none {mnt} && "
              f"{py} index add {mnt}/ix {small} && "
              f"{py} index add {mnt}/ix {big}; echo rc=$?; "
              f"{py} index add {mnt}/new {big}; echo rc=$?; "
              f"cd {mnt} && find . | sort")
    p = subprocess.run(["unshare", "-m", "sh", "-c", script], env=env(), capture_output=True, text=True)
    out = p.stdout.split()
    assert out[0] == "rc=2" and out[1] == "rc=2", p.stdout + p.stderr
    errors = [line for line in p.stderr.splitlines() if line.startswith("neardup: error:")]
    assert len(errors) == 2 and all("No space left on device" in e for e in errors), p.stderr
    assert f"cannot write index {mnt}/ix:" in errors[0] and f"cannot write index {mnt}/new:" in errors[1]
    files = out[2:]
    assert not [f for f in files if ".tmp" in f], files
    assert "./new/.lock" in files and not [f for f in files if f.startswith("./new/") and f != "./new/.lock"]
    assert sum(1 for f in files if f.startswith("./ix/segments/") and f.count("/") == 3) == 1


def test_block_sums_of_a_file_written_in_chunks_are_those_of_the_whole():
    """Chunks of any size (a compaction writes fingerprints in pieces that do not end on 4 KiB
    blocks) give the block checksums of the whole file, the last block short."""
    import zlib
    from neardup.index.segments import BLOCK_BYTES, block_sums, with_block_sums
    rng = np.random.default_rng(5)
    whole = rng.integers(0, 2**32, 10_000, dtype=np.uint64).astype(np.uint32)  # 40,000 bytes: 9 blocks and a part
    cuts = np.sort(rng.choice(np.arange(1, len(whole)), 25, replace=False))
    pieces = [("fp.u32", p) for p in np.split(whole, cuts)] + [("id.bin", np.zeros(3, np.uint8))]
    out = list(with_block_sums(iter(pieces)))
    assert out[:-1] == pieces
    name, sums = out[-1]
    raw = whole.tobytes()
    assert name == "fp.crc" and len(sums) == -(-len(raw) // BLOCK_BYTES)
    assert sums.tolist() == [zlib.crc32(raw[i:i + BLOCK_BYTES]) for i in range(0, len(raw), BLOCK_BYTES)]
    assert block_sums(whole).tolist() == sums.tolist()
    assert list(with_block_sums(iter([("fp.u32", np.zeros(0, np.uint32))])))[-1][1].tolist() == []


def test_an_index_of_the_previous_format_is_refused_in_one_line_that_says_rebuild(tmp_path, split, a_file, capsys):
    """Format 2 had no block checksums: its fingerprints would be read unchecked, so it is
    refused, by every command, and left as it was."""
    from neardup.index.storage import manifest_bytes
    ix = build(tmp_path / "ix", split)
    manifest = Index(ix).storage.read_manifest()
    old = dict(manifest, version=2)
    open(os.path.join(ix, "manifest.json"), "wb").write(manifest_bytes(old))
    before = tree(ix)
    for argv in (["index", "query", ix, a_file], ["index", "add", ix, a_file], ["index", "stats", ix],
                 ["index", "compact", ix]):
        one_line(capsys, main(argv), "format version 2", "reads version 3", "rebuild it")
    assert tree(ix) == before


def test_a_manifest_published_while_the_folder_is_looked_at_is_an_index(tmp_path, split):
    """The look at an index folder before its lock (does it hold a manifest, else anything
    else?) races another process's first add: its manifest and then its segments may appear
    between the two looks. The folder is then an index, not a foreign folder."""
    import shutil

    made = build(tmp_path / "made", split, parts=2)
    target = tmp_path / "ix"
    target.mkdir()
    storage = FolderStorage(str(target))
    real = storage.folder.names
    calls = []

    def names(*args):
        if not calls:  # the other process publishes between the manifest's check and the listing
            shutil.copytree(os.path.join(made, "segments"), target / "segments")
            shutil.copy(os.path.join(made, "manifest.json"), target / "manifest.json")
        calls.append(args)
        return real(*args)

    storage.folder.names = names
    assert storage._state() == "index"
    assert calls
