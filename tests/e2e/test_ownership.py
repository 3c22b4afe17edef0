"""neardup writes, replaces and deletes only what it can prove it owns, and publishes a result
only when the whole result is there (issue 17). Each test is an attack a careless user or a
hostile folder makes; the guard each one checks is named in its docstring, with the one-line
change of the code that makes it fail."""

from __future__ import annotations

import fcntl
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from helpers import ROOT, run_cli
from neardup.io.storage.folder import OLD

EXAMPLE = ROOT / "examples" / "corpus.jsonl"


def tree(folder: Path) -> dict:
    """Every file under ``folder`` with its bytes (folders as None): what must not change."""
    out = {}
    for p in sorted(Path(folder).rglob("*")):
        out[str(p.relative_to(folder))] = p.read_bytes() if p.is_file() else None
    return out


def result_bytes(folder: Path) -> dict:
    """An output's result files and their bytes (stats.json without its seconds)."""
    out = {}
    for p in sorted(Path(folder).rglob("*")):
        rel = p.relative_to(folder)
        if not p.is_file() or rel.parts[0].startswith(".neardup"):
            continue
        data = p.read_bytes()
        if rel.name == "stats.json":
            d = json.loads(data)
            d.pop("seconds", None)
            data = json.dumps(d, sort_keys=True).encode()
        out[str(rel)] = data
    return out


def one_error_line(capsys) -> str:
    err = capsys.readouterr().err
    lines = [x for x in err.splitlines() if x.strip()]
    assert len(lines) == 1 and lines[0].startswith("neardup: error: "), err
    assert "Traceback" not in err
    return lines[0]


@pytest.fixture
def corpus(tmp_path) -> Path:
    """A small corpus with near-duplicates: the shipped example, copied (its mtime is this test's)."""
    p = tmp_path / "data" / "corpus.jsonl"
    p.parent.mkdir()
    p.write_bytes(EXAMPLE.read_bytes())
    return p


@pytest.fixture
def other_corpus(tmp_path) -> Path:
    p = tmp_path / "other" / "half.jsonl"
    p.parent.mkdir()
    p.write_bytes(b"".join(EXAMPLE.read_bytes().splitlines(keepends=True)[:150]))
    return p


# --------------------------------------------------------------------------- folders that are not ours


def test_a_project_folder_as_work_dir_is_refused_untouched(tmp_path, corpus, capsys, monkeypatch):
    """Guard: Folder.check_claim refuses a non-empty folder without a marker (mutation: return
    the marker without looking at the folder's entries -> src/ and .git/ are deleted)."""
    project = tmp_path / "myproject"
    (project / "src").mkdir(parents=True)
    (project / "src" / "main.py").write_text("print('mine')\n")
    (project / ".git").mkdir()
    (project / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    before = tree(project)
    monkeypatch.chdir(project)
    assert run_cli("dedup", corpus, "-o", tmp_path / "out", "--work-dir", ".", "-q") == 2
    assert "holds files neardup did not write" in one_error_line(capsys)
    assert tree(project) == before  # not even a lock file
    assert not (tmp_path / "out").exists()


def test_a_file_as_work_dir_or_output_is_refused_untouched(tmp_path, corpus, capsys):
    """Guard: check_claim refuses a file (mutation: drop the is_file check -> a traceback, or the
    file is replaced)."""
    precious = tmp_path / "precious.jsonl"
    precious.write_text('{"text": "mine"}\n')
    assert run_cli("dedup", corpus, "-o", tmp_path / "out", "--work-dir", precious, "-q") == 2
    assert "is a file" in one_error_line(capsys)
    assert run_cli("dedup", corpus, "-o", precious, "-q") == 2
    assert "is a file" in one_error_line(capsys)
    assert precious.read_text() == '{"text": "mine"}\n'


def test_a_foreign_folder_as_output_is_refused_untouched(tmp_path, corpus, capsys):
    out = tmp_path / "notes"
    out.mkdir()
    (out / "todo.txt").write_text("buy milk\n")
    (out / ".hidden").write_text("still mine\n")
    before = tree(out)
    assert run_cli("dedup", corpus, "-o", out, "-q") == 2
    assert "holds files neardup did not write" in one_error_line(capsys)
    assert tree(out) == before


@pytest.mark.parametrize("where", ["work-dir is the input folder", "output inside the input folder",
                                   "work dir inside the input folder", "output holds the input"])
def test_a_folder_that_is_holds_or_lies_inside_an_input_is_refused(tmp_path, corpus, capsys, where):
    """Guard: refuse_overlap (mutation: make ``overlapping`` return None -> the input folder is
    emptied as a work dir, or the run reads its own output next time)."""
    data = corpus.parent
    before = tree(data)
    args = {"work-dir is the input folder": ["-o", tmp_path / "out", "--work-dir", data],
            "output inside the input folder": ["-o", data / "out"],
            "work dir inside the input folder": ["-o", tmp_path / "out", "--work-dir", data / "w"],
            "output holds the input": ["-o", tmp_path]}[where]
    assert run_cli("dedup", data, *args, "-q") == 2
    assert "inside the input" in one_error_line(capsys)
    assert tree(data) == before


def test_output_and_work_dir_of_the_wrong_kind_are_refused(tmp_path, corpus, capsys):
    out, work = tmp_path / "out", tmp_path / "work"
    assert run_cli("dedup", corpus, "-o", out, "--work-dir", work, "-q") == 0
    before = tree(out)
    assert run_cli("dedup", corpus, "-o", tmp_path / "o2", "--work-dir", out, "-q") == 2
    assert "is a neardup output folder, not a neardup work dir" in one_error_line(capsys)
    assert run_cli("dedup", corpus, "-o", work, "-q") == 2
    assert "is a neardup work dir, not a neardup output folder" in one_error_line(capsys)
    assert tree(out) == before


def test_the_work_dir_may_not_hold_the_output(tmp_path, corpus, capsys):
    work = tmp_path / "work"
    assert run_cli("dedup", corpus, "-o", work / "out", "--work-dir", work, "-q") == 2
    assert "holds the output folder" in one_error_line(capsys)


# --------------------------------------------------------------------------- inputs are paths


@pytest.mark.parametrize("name", ["My Documents/corpus.jsonl", "nosuchfile"])
def test_a_missing_input_is_an_error_not_a_text(tmp_path, capsys, name, monkeypatch):
    """Guard: the CLI passes paths=True (mutation: drop it -> the path is deduplicated as a
    one-document text and the run exits 0)."""
    monkeypatch.chdir(tmp_path)
    assert run_cli("dedup", name, "-o", "o", "-q") == 2
    assert f"no such file or folder: {name}" in one_error_line(capsys)
    assert not (tmp_path / "o").exists()


def test_an_input_with_a_space_in_its_path_is_read_as_a_file(tmp_path, corpus, monkeypatch):
    folder = tmp_path / "My Documents"
    folder.mkdir()
    (folder / "corpus.jsonl").write_bytes(corpus.read_bytes())
    monkeypatch.chdir(tmp_path)
    assert run_cli("dedup", "My Documents/corpus.jsonl", "-o", "o1", "-q") == 0
    stats = json.loads((tmp_path / "o1" / "stats.json").read_text())
    assert stats["counts"]["input"] == 300


# --------------------------------------------------------------------------- runs, resumes, reruns


def test_resume_onto_the_finished_output_of_other_inputs_is_refused(tmp_path, corpus, other_corpus, capsys):
    """Guard: claim_output compares the marker's run with this run (mutation: accept any result
    with --resume -> the other run's output is replaced without --overwrite)."""
    out = tmp_path / "out"
    assert run_cli("dedup", corpus, "-o", out, "-q") == 0
    before = result_bytes(out)
    assert run_cli("dedup", other_corpus, "-o", out, "-q", "--resume") == 2
    assert "of other inputs or options; pass --overwrite" in one_error_line(capsys)
    assert result_bytes(out) == before
    assert run_cli("dedup", other_corpus, "-o", out, "-q") == 2
    assert "holds the results of an earlier run" in one_error_line(capsys)
    assert run_cli("dedup", other_corpus, "-o", out, "-q", "--overwrite") == 0
    assert json.loads((out / "stats.json").read_text())["counts"]["input"] == 150


def _interrupted_work(tmp_path, corpus) -> tuple:
    """A work dir whose run stopped after the read stage (kept, as --work-dir is)."""
    from neardup.stages.workdir import STAGES
    out, work = tmp_path / "out", tmp_path / "work"
    assert run_cli("dedup", corpus, "-o", out, "--work-dir", work, "-q") == 0
    state = json.loads((work / "state.json").read_text())
    assert set(state["done"]) == set(STAGES)
    state["done"] = {"read": state["done"]["read"]}
    (work / "state.json").write_text(json.dumps(state))
    return out, work


def test_resume_with_changed_options_says_what_differs(tmp_path, corpus, capsys):
    """Guard: WorkDir refuses work of another identity with --resume (mutation: start over as
    before -> the run silently recomputes)."""
    out, work = _interrupted_work(tmp_path, corpus)
    before = tree(work)
    assert run_cli("dedup", corpus, "-o", tmp_path / "out2", "--work-dir", work, "-q", "--resume",
                   "--threshold", "0.7", "--ngram", "3") == 2
    line = one_error_line(capsys)
    assert "cannot resume" in line and "ngram" in line and "threshold" in line and "inputs" not in line
    assert tree(work) == before


def test_the_work_of_an_older_layout_is_refused_in_one_line(tmp_path, corpus, capsys):
    """Guard: WorkDir compares the work dir's format with LAYOUT_VERSION (layout 4 kept the
    fingerprints raw; mutation: accept any format -> --resume reads raw uint32 as codes). Refused
    with and without --resume, untouched; --overwrite starts over."""
    from neardup.stages.workdir import LAYOUT_VERSION
    out, work = _interrupted_work(tmp_path, corpus)
    marker = json.loads((work / ".neardup").read_text())
    state = json.loads((work / "state.json").read_text())
    (work / ".neardup").write_text(json.dumps({**marker, "format": LAYOUT_VERSION - 1}))
    (work / "state.json").write_text(json.dumps({**state, "layout": LAYOUT_VERSION - 1}))
    before = tree(work)
    assert run_cli("dedup", corpus, "-o", out, "--work-dir", work, "-q", "--resume") == 2
    line = one_error_line(capsys)
    assert "cannot resume" in line and f"layout {LAYOUT_VERSION - 1} (this version writes {LAYOUT_VERSION})" in line
    assert run_cli("dedup", corpus, "-o", out, "--work-dir", work, "-q") == 2
    assert "--overwrite" in one_error_line(capsys)
    assert tree(work) == before
    assert run_cli("dedup", corpus, "-o", out, "--work-dir", work, "-q", "--overwrite") == 0
    assert json.loads((work / ".neardup").read_text())["format"] == LAYOUT_VERSION


def test_a_rerun_without_resume_is_told_it_can_resume(tmp_path, corpus, capsys):
    """Guard: WorkDir refuses to discard resumable work silently (mutation: drop the check ->
    the read stage is thrown away and run again)."""
    out, work = _interrupted_work(tmp_path, corpus)
    before = tree(work)
    assert run_cli("dedup", corpus, "-o", out, "--work-dir", work, "-q", "--overwrite") == 0  # start over: allowed
    out2 = tmp_path / "out2"
    _interrupted_work_again = json.loads((work / "state.json").read_text())
    _interrupted_work_again["done"] = {"read": _interrupted_work_again["done"]["read"]}
    (work / "state.json").write_text(json.dumps(_interrupted_work_again))
    assert run_cli("dedup", corpus, "-o", out2, "--work-dir", work, "-q") == 2
    line = one_error_line(capsys)
    assert "interrupted run of these inputs" in line and "--resume" in line and "read" in line
    assert run_cli("dedup", corpus, "-o", out2, "--work-dir", work, "-q", "--resume") == 0
    assert result_bytes(out2) == result_bytes(out)
    assert set(before) <= set(tree(work)) | {"clusters", "pairs"}


def test_another_run_of_other_inputs_in_the_work_dir_is_not_wiped(tmp_path, corpus, other_corpus, capsys):
    out, work = _interrupted_work(tmp_path, corpus)
    before = tree(work)
    assert run_cli("dedup", other_corpus, "-o", tmp_path / "o2", "--work-dir", work, "-q") == 2
    line = one_error_line(capsys)
    assert "another run's work (differs: inputs)" in line and "--overwrite" in line
    assert tree(work) == before


def test_two_runs_on_one_output_at_once(tmp_path, corpus, capsys):
    """Guard: LocalFolder.lock (mutation: make lock() a nullcontext -> the second run writes
    into the folder the first one is using)."""
    out = tmp_path / "out"
    assert run_cli("dedup", corpus, "-o", out, "-q") == 0
    before = result_bytes(out)
    fd = os.open(out / ".neardup.lock", os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)  # as a running neardup holds it
        assert run_cli("dedup", corpus, "-o", out, "-q", "--overwrite") == 2
        assert "another neardup run is using this folder" in one_error_line(capsys)
    finally:
        os.close(fd)
    assert result_bytes(out) == before
    assert run_cli("dedup", corpus, "-o", out, "-q", "--overwrite") == 0


# --------------------------------------------------------------------------- kill -9 at each publish step

# The crash is injected by the test, not by the code: this driver wraps os.replace in the child
# process and kills it (SIGKILL) just before the rename whose target ends with the given suffix.
_DRIVER = textwrap.dedent("""
    import os, signal, sys
    suffix, argv = sys.argv[1], sys.argv[2:]
    real = os.replace
    def replace(src, dst, *a, **k):
        if os.fspath(dst).endswith(suffix):
            os.kill(os.getpid(), signal.SIGKILL)
        return real(src, dst, *a, **k)
    os.replace = replace
    from neardup.cli import main
    sys.exit(main(argv))
""")


def _killed_at(suffix: str, *args) -> None:
    proc = subprocess.run([sys.executable, "-c", _DRIVER, suffix, *map(str, args)], capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == -9, f"not killed at {suffix}: rc={proc.returncode} {proc.stderr[-2000:]}"


@pytest.mark.slow
@pytest.mark.parametrize("suffix", [
    "read/block-000000.arrow",        # the read stage publishes a block's files
    "read/block-000000.json",         # ... and its summary (the block is done)
    "pairs/part-00000.arrow",         # the pairs stage's part file
    "clusters/part-00000.arrow",      # the clusters stage's part file
    os.sep + "state.json",            # a stage is marked done
    ".neardup-staging/stats.json",    # the result is complete in the staging folder
    OLD + os.sep + "kept",            # publish: the old kept/ moved into the staging folder
    "out" + os.sep + "kept",          # publish: kept/ moved into the output
    "out" + os.sep + "stats.json",    # publish: stats.json moved in last
])
def test_kill_at_each_publish_step_then_resume_gives_the_same_bytes(tmp_path, corpus, other_corpus, suffix):
    """Guard: Folder.publish removes stats.json first and moves it in last (mutation: move
    stats.json first -> a killed publish leaves a folder that looks complete and is not)."""
    ref = tmp_path / "ref"
    assert run_cli("dedup", corpus, "-o", ref, "-q") == 0
    out = tmp_path / "out"
    assert run_cli("dedup", other_corpus, "-o", out, "-q") == 0  # an older result, of other inputs
    old = result_bytes(out)
    args = ["dedup", corpus, "-o", out, "-q", "--overwrite"]
    _killed_at(suffix, *args)
    now = result_bytes(out)
    if "stats.json" in now:  # killed before the publish began: the old result is whole
        assert now == old
    else:  # killed inside the publish: no stats.json, so nothing looks complete
        assert all(not name.startswith("stats") for name in now)
    assert run_cli(*args[:-1], "--resume") == 0
    assert result_bytes(out) == result_bytes(ref)
    assert not (out / ".neardup-staging").exists()
    assert not [p for p in out.rglob("*.tmp")]


# --------------------------------------------------------------------------- the machine's problems


def test_an_output_under_a_file_is_one_line(tmp_path, corpus, capsys):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    assert run_cli("dedup", corpus, "-o", blocker / "out", "-q") == 2
    line = one_error_line(capsys)
    assert str(blocker) in line and "Not a directory" in line


@pytest.mark.parametrize("under", [False, True])
def test_an_output_through_a_dangling_link_is_one_line(tmp_path, corpus, capsys, under):
    """`-o out` where out is a link to a missing place (a disk not mounted), or lies under one:
    makedirs' FileExistsError / FileNotFoundError were a traceback (exit 1), not one line."""
    link = tmp_path / "link"
    os.symlink(tmp_path / "not-mounted" / "out", link)
    assert run_cli("dedup", corpus, "-o", link / "sub" if under else link, "-q") == 2
    line = one_error_line(capsys)
    assert str(link) in line
    assert not (tmp_path / "not-mounted").exists()


def _distinct_documents(path: Path, size: int) -> None:
    """JSONL of random-word documents (no two alike) of about ``size`` bytes."""
    import random
    rng = random.Random(7)
    words = [f"w{i}" for i in range(50000)]
    with open(path, "w") as f:
        written = 0
        while written < size:
            line = json.dumps({"text": " ".join(rng.choices(words, k=300))}) + "\n"
            f.write(line)
            written += len(line)


@pytest.fixture
def small_disk(tmp_path):
    """A 2 MiB tmpfs (root only; skipped elsewhere)."""
    mnt = tmp_path / "disk"
    mnt.mkdir()
    if os.geteuid() != 0 or subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(mnt)],
                                           capture_output=True).returncode != 0:
        pytest.skip("needs root and mount to make a small disk")
    yield mnt
    subprocess.run(["umount", "-l", str(mnt)], capture_output=True)


def test_a_full_disk_leaves_the_old_result_whole_and_no_temporary_files(tmp_path, corpus, other_corpus,
                                                                         small_disk, capsys):
    """Guard: the result is written to the staging folder and published only when whole
    (mutation: write the stages straight into the output -> a full disk leaves a mixed result
    under the old stats.json)."""
    out, work = small_disk / "out", tmp_path / "work"
    assert run_cli("dedup", other_corpus, "-o", out, "--work-dir", work, "-q") == 0
    old = result_bytes(out)
    big = tmp_path / "big.jsonl"
    _distinct_documents(big, 3 << 20)  # its kept copy does not fit beside the old result
    assert run_cli("dedup", big, "-o", out, "--work-dir", work, "-q", "--overwrite") == 2
    line = one_error_line(capsys)
    # the path being written is named (mutation: drop naming() in io.storage.local._AtomicLocal)
    assert f"{out}/.neardup-staging/kept/big.jsonl: No space left on device" in line, line
    assert result_bytes(out) == old
    assert sorted(p.name for p in out.iterdir()) == sorted(
        [".neardup", ".neardup.lock", "clusters.parquet", "kept", "removed.parquet", "report.html", "stats.json",
         "texts_sample.parquet"])


def test_a_full_disk_in_the_read_stage_leaves_no_temporary_blocks(tmp_path, corpus, small_disk, capsys):
    big = tmp_path / "big.jsonl"
    _distinct_documents(big, 12 << 20)  # its work files do not fit
    work = small_disk / "work"
    assert run_cli("dedup", big, "-o", tmp_path / "out", "--work-dir", work, "-q") == 2
    line = one_error_line(capsys)
    assert f"{work}/read/block-000000.fp: No space left on device" in line, line  # the path being written
    assert not [p for p in work.rglob("*.tmp")]
    assert not (tmp_path / "out" / "stats.json").exists()


def test_a_full_disk_while_copying_a_kept_text_file_names_it(tmp_path, small_disk, capsys):
    """Guard: the copy of a kept text file names the file it was writing when the disk is full
    (mutation: drop the OSError branch in io.formats.text's copy -> "No space left on device" alone)."""
    import random
    rng = random.Random(3)
    src = tmp_path / "docs" / "big.txt"
    src.parent.mkdir()
    src.write_text(" ".join(f"w{rng.randrange(10**6)}" for _ in range(400_000)))  # ~3 MiB
    out = small_disk / "out"
    assert run_cli("dedup", src.parent, "-o", out, "--work-dir", tmp_path / "work", "-q") == 2
    line = one_error_line(capsys)
    assert f"{out}/.neardup-staging/kept/big.txt: No space left on device" in line, line


# --------------------------------------------------------------------------- credentials


def test_credentials_in_urls_are_never_printed(tmp_path, corpus, capsys):
    """Guard: the CLI's error line goes through fs.redact (mutation: print str(exc) -> the
    password is on the terminal)."""
    assert run_cli("dedup", "http://alice:SECRETPW@127.0.0.1:9/corpus.jsonl", "-o", tmp_path / "o", "-q") == 2
    assert "SECRETPW" not in capsys.readouterr().err
    assert run_cli("dedup", corpus, "-o", "s3://AKIAKEY:SECRETPW@bucket/out", "-q") == 2
    assert "SECRETPW" not in capsys.readouterr().err


def test_redact_hides_every_kind_of_credential():
    from neardup.io.storage.fs import redact
    assert redact("http://user:pw@host/x") == "http://user:***@host/x"
    assert redact("redis://:pw@localhost:6379/0") == "redis://***@localhost:6379/0"
    assert redact("rediss://token@h:1") == "rediss://***@h:1"
    assert redact("see s3://K:S@b/x and gs://b/y@z") == "see s3://K:***@b/x and gs://b/y@z"
    assert redact("/plain/path@home") == "/plain/path@home"


# --------------------------------------------------------------------------- object storage


@pytest.mark.slow
def test_a_bucket_with_other_objects_is_refused_as_work_dir_or_output(tmp_path, corpus, capsys, s3):
    """On a real S3 API: ``--work-dir s3://bucket/`` (the Ray engine keeps its work dir there)
    and ``-o s3://bucket/`` are refused untouched when the bucket holds objects neardup did not
    write (before, WorkDir emptied the bucket first). Guard: check_claim on a RemoteFolder
    (mutation: drop the ``if foreign:`` refusal -> the objects are deleted or overwritten)."""
    s3.put("precious/data.bin", b"mine")
    s3.put("notes.txt", b"also mine")
    before = {k: s3.get(k) for k in s3.keys()}
    assert run_cli("dedup", corpus, "-o", tmp_path / "out", "--engine", "ray", "--work-dir", s3.url(""), "-q") == 2
    assert "holds files neardup did not write" in one_error_line(capsys)
    assert run_cli("dedup", corpus, "-o", s3.url(""), "-q") == 2
    assert "holds files neardup did not write" in one_error_line(capsys)
    assert {k: s3.get(k) for k in s3.keys()} == before


@pytest.mark.slow
def test_params_plot_refuses_an_existing_file_without_overwrite(tmp_path, capsys):
    """Guard: check_output_file in ``neardup params --plot`` (mutation: drop the call -> the
    user's file is replaced)."""
    import matplotlib  # noqa: F401
    mine = tmp_path / "curve.png"
    mine.write_bytes(b"my picture")
    assert run_cli("params", "--plot", mine) == 2
    assert "it exists; give --overwrite" in one_error_line(capsys)
    assert mine.read_bytes() == b"my picture"
    assert run_cli("params", "--plot", mine, "--overwrite") == 0
    assert mine.read_bytes().startswith(b"\x89PNG")


def test_an_output_on_a_read_only_disk_is_one_line(tmp_path, corpus, capsys):
    """A folder that cannot be written (a read-only mount: root ignores permission bits) is the
    machine's problem: one line naming the path, exit 2, not a bug report."""
    mnt = tmp_path / "ro"
    mnt.mkdir()
    if os.geteuid() != 0 or subprocess.run(["mount", "-t", "tmpfs", "-o", "ro,size=1m", "tmpfs", str(mnt)],
                                           capture_output=True).returncode != 0:
        pytest.skip("needs root and mount to make a read-only disk")
    try:
        assert run_cli("dedup", corpus, "-o", mnt / "out", "-q") == 2
        line = one_error_line(capsys)
        assert str(mnt / "out") in line and "Read-only file system" in line
    finally:
        subprocess.run(["umount", "-l", str(mnt)], capture_output=True)


@pytest.mark.slow
def test_index_add_and_query_take_urls_as_given(tmp_path, corpus, s3):
    """``neardup index add/query`` read an s3:// input (pathlib turned it into ``s3:/...``, a
    missing local file), and query -o refuses an existing file without --overwrite."""
    url = s3.put("in/corpus.jsonl", corpus.read_bytes())
    idx = tmp_path / "idx"
    assert run_cli("index", "add", idx, url) == 0
    out = tmp_path / "matches.jsonl"
    assert run_cli("index", "query", idx, url, "-o", out) == 0
    rows = [json.loads(x) for x in out.read_text().splitlines()]
    assert len(rows) == 300 and all(r["matches"] for r in rows)  # every document is in the index
    assert run_cli("index", "query", idx, url, "-o", out) == 2
    assert run_cli("index", "query", idx, url, "-o", out, "--overwrite") == 0


def test_deep_json_on_the_first_line_is_one_line(tmp_path, capsys):
    """The "does every record carry an id?" look at the first line meets the nesting too."""
    deep = tmp_path / "deep.jsonl"
    deep.write_text('{"text": "a b c d e", "x": ' + "[" * 5000 + "]" * 5000 + "}\n")
    assert run_cli("dedup", deep, "-o", tmp_path / "o", "-q") == 2
    assert "nested too deeply" in one_error_line(capsys)


def test_an_http_output_is_not_asked_for_a_bucket(tmp_path, corpus, capsys):
    assert run_cli("dedup", corpus, "-o", "http://u:SECRETPW@127.0.0.1:9/out", "-q") == 2
    line = one_error_line(capsys)
    assert "no such bucket" not in line and "SECRETPW" not in line


def test_overwrite_never_deletes_a_users_file_in_kept(tmp_path, corpus, capsys):
    """Guard: a run replaces OUTPUT/kept/ only when every file there is one of the previous
    result's stats.json kept_files (mutation: drop the _refuse_foreign_kept call in claim_output
    -> --overwrite deletes the user's notes with the old kept/)."""
    out = tmp_path / "out"
    assert run_cli("dedup", corpus, "-o", out, "-q") == 0
    (out / "kept" / "NOTES.md").write_text("my notes on this run")
    (out / "kept" / "mine").mkdir()
    (out / "kept" / "mine" / "extra.jsonl").write_text("{}\n")
    before = tree(out)
    capsys.readouterr()
    assert run_cli("dedup", corpus, "-o", out, "-q", "--overwrite") == 2
    line = one_error_line(capsys)
    assert "kept/NOTES.md, kept/mine/extra.jsonl were not written by neardup" in line and "move them out" in line, line
    assert tree(out) == before
    (out / "kept" / "NOTES.md").unlink()
    (out / "kept" / "mine" / "extra.jsonl").unlink()
    assert run_cli("dedup", corpus, "-o", out, "-q", "--overwrite") == 0  # neardup's own files: replaced
    # a kept/ in an output folder that holds no result is not neardup's either
    (out / "stats.json").unlink()
    assert run_cli("dedup", corpus, "-o", out, "-q", "--overwrite") == 2
    assert "kept/corpus.jsonl was not written by neardup" in one_error_line(capsys)


def test_a_publish_cut_short_is_resumed_though_kept_is_checked(tmp_path, corpus, capsys, monkeypatch):
    """A publish that fails half way (stats.json gone, kept/ the new one: here the disk fails
    while the index is updated) keeps its staging folder, which marks kept/ as neardup's, so
    --resume finishes it (mutation: remove the staging folder on any failure in run() ->
    --resume is refused: "kept/corpus.jsonl was not written by neardup")."""
    import errno

    import neardup.stages.against as against
    ix, out = tmp_path / "ix", tmp_path / "out"
    assert run_cli("index", "add", ix, tmp_path / "data") == 0
    args = ["dedup", corpus, "-o", out, "-q", "--against", ix, "--update-index"]

    def disk_fails(run):
        raise OSError(errno.EIO, "Input/output error", str(ix / "segments"))
    monkeypatch.setattr(against, "update_index", disk_fails)
    capsys.readouterr()
    assert run_cli(*args) == 2
    assert "Input/output error" in one_error_line(capsys)
    assert not (out / "stats.json").exists() and (out / "kept").exists()
    monkeypatch.undo()
    assert run_cli(*args, "--resume") == 0, capsys.readouterr().err
    assert json.loads((out / "stats.json").read_text())["index_update"]["added"] == 0


# --------------------------------------------------------------------------- a check that fails leaves nothing behind

def _make_index(ix, corpus, *options):
    assert run_cli("index", "add", ix, corpus, *options) == 0


@pytest.mark.parametrize("case", ["missing", "other parameters", "other hash version", "verify"])
def test_a_failed_against_check_leaves_nothing_that_blocks_the_corrected_command(tmp_path, corpus, capsys, case):
    """Guard: run() checks every --against index (exists, same parameters and hash version,
    verifies by what the run's --verify computes) before the output or the work dir is claimed
    (mutation: drop the check_indexes call in run() -> the output and work dir are claimed,
    the read stage fails, and the corrected command is told "holds another run's work; pass
    --overwrite"). The message names the command line's options, not the API's arguments."""
    ix, out, work = tmp_path / "ix", tmp_path / "out", tmp_path / "work"
    run = ["dedup", corpus, "-o", out, "--work-dir", work, "-q", "--against", ix]
    if case == "other parameters":
        _make_index(ix, corpus, "--num-perm", "64")
    elif case == "other hash version":
        _make_index(ix, corpus, "--hash-version", "1")
    elif case == "verify":
        _make_index(ix, corpus, "--verify", "exact")
        run += ["--verify", "estimate"]
    capsys.readouterr()
    assert run_cli(*run) == 2
    line = one_error_line(capsys)
    assert "pass signatures" not in line and "pass shingles" not in line, line
    if case == "verify":
        assert "--verify exact" in line, line
    assert not out.exists() and not work.exists(), (tree(tmp_path))
    if case == "missing":
        _make_index(ix, corpus)
    else:  # the corrected command: an index made with the run's parameters
        import shutil
        shutil.rmtree(ix)
        _make_index(ix, corpus, *(["--verify", "estimate"] if case == "verify" else []))
    capsys.readouterr()
    assert run_cli(*run) == 0, capsys.readouterr().err


def test_a_run_that_stopped_before_its_first_block_leaves_a_reusable_work_dir(tmp_path, corpus, capsys):
    """Guard: WorkDir counts as work only a stage done or a block read (mutation: has_work = state is
    not None and any file beside state.json -> a run that failed on its first record leaves a work
    dir that refuses the corrected command without --overwrite)."""
    bad = tmp_path / "data" / "bad.jsonl"
    bad.write_bytes(b'{"text": "one"}\n{"text": \n' + corpus.read_bytes())
    out, work = tmp_path / "out", tmp_path / "work"
    assert run_cli("dedup", bad, "-o", out, "--work-dir", work, "-q") == 2
    capsys.readouterr()
    bad.write_bytes(corpus.read_bytes())  # corrected
    assert run_cli("dedup", bad, "-o", out, "--work-dir", work, "-q") == 0, capsys.readouterr().err
