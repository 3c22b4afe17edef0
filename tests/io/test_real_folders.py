"""Reading what users point neardup at: folders of code with data files, binaries and symbolic
links (--input-format text, binary files skipped, links read once or not followed), empty data
files, and kept/ laid out below the inputs' common folder."""

from __future__ import annotations

import json
import os

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from neardup.errors import InputError
from neardup.io import discover, read_source
from helpers import run_in_process as neardup
from io_inputs import put


def words(i: int, n: int = 60) -> str:
    return " ".join(f"w{i}x{j}" for j in range(n))


# --------------------------------------------------------------------------- --input-format text


def test_input_format_text_reads_every_file_as_one_document(cwd):
    pretty = json.dumps({"a": [1, 2], "text": "x"}, indent=2)
    put("d/config.json", pretty)
    put("d/data.csv", "a,b\n1,2\n")
    put("d/notes.txt", "hello")
    assert [s.format for s in discover(["d"])] == ["jsonl", "csv", "text"]
    srcs = discover(["d"], input_format="text")
    assert [(s.format, s.compression) for s in srcs] == [("text", None)] * 3
    texts = [t for s in srcs for b in read_source(s) for t in b.text.to_pylist()]
    assert texts == [pretty, "a,b\n1,2\n", "hello"]


def test_input_format_text_cli_keeps_files_whole(cwd):
    put("d/a.json", json.dumps({"k": words(1)}, indent=2))
    put("d/b.json", json.dumps({"k": words(1)}, indent=2))
    put("d/c.json", json.dumps({"k": words(2)}, indent=2))
    ran = neardup("dedup", "d", "-o", "out", "--input-format", "text", "-q")
    assert ran.returncode == 0, ran.stderr
    assert sorted(os.listdir("out/kept")) == ["a.json", "c.json"]
    assert open("out/kept/a.json").read() == open("d/a.json").read()
    stats = json.load(open("out/stats.json"))
    assert stats["counts"]["input"] == 3 and stats["counts"]["removed"] == 1
    assert stats["params"]["input_format"] == "text"
    # without it, each pretty-printed line is a broken record
    assert neardup("dedup", "d", "-o", "out2", "-q").returncode == 2


# --------------------------------------------------------------------------- binary files


def test_walk_skips_binary_and_non_utf8_files(cwd):
    put("d/a.txt", words(1))
    put("d/b.png", b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR")
    put("d/c.txt", "caf\xe9".encode("latin-1"))
    srcs = discover(["d"])
    got = [[(len(b), b.skipped, b.rejected) for b in read_source(s)] for s in srcs]
    assert got[0] == [(1, None, [])]
    assert got[1] == [(0, "binary file (a NUL byte at byte 8)", [])]
    assert got[2] == [(0, "not UTF-8 text (invalid UTF-8 at byte 3)", [])]
    # a file named on its own is no walk: an error as before
    named = discover(["d/c.txt"])[0]
    with pytest.raises(InputError, match=r"^d/c.txt: invalid UTF-8 at byte 3$"):
        list(read_source(named))


def test_a_named_file_with_a_nul_byte_is_an_error_as_the_readme_says(cwd):
    """A file named on its own that is valid UTF-8 but holds a NUL byte (a binary, or UTF-16 text
    of ASCII characters) is an error, or a rejected entry under --on-error skip, as a file that
    is not UTF-8 is; in a walk it is skipped (mutation: test NUL only when src.walked in
    io.formats.text.text_document -> the file is read as a document of its bytes)."""
    put("d/notes.txt", "hello".encode("utf-16-le"))  # valid UTF-8, a NUL after every letter
    named = discover(["d/notes.txt"])[0]
    with pytest.raises(InputError, match=r"^d/notes.txt: a binary file, not text \(a NUL byte at byte 1\) \(UTF-16"):
        list(read_source(named))
    rejected = [r for b in read_source(named, on_error="skip") for r in b.rejected]
    assert len(rejected) == 1 and "a NUL byte at byte 1" in rejected[0][-1]
    ran = neardup("dedup", "d/notes.txt", "-o", "out")
    assert ran.returncode == 2 and "a NUL byte at byte 1" in ran.stderr, ran.stderr
    assert [(len(b), b.skipped) for b in read_source(discover(["d"])[0])] == [(0, "binary file (a NUL byte at byte 1)")]


def test_binary_files_counted_in_summary_and_stats(cwd):
    put("d/a.txt", words(1))
    put("d/b.txt", words(1))
    put("d/lib.so", b"\x7fELF\x02\x01\x01\x00\x00\x00")
    put("d/logo.png", b"\x89PNG\r\n\x1a\n\x00\x00")
    ran = neardup("dedup", "d", "-o", "out")
    assert ran.returncode == 0, ran.stderr
    assert "files: 4 input files, 2 binary or non-UTF-8 files skipped" in ran.stderr
    stats = json.load(open("out/stats.json"))
    assert stats["files"]["skipped_binary"] == 2 and stats["files"]["inputs"] == 4
    assert stats["counts"]["input"] == 2
    assert [i.get("skipped") for i in stats["inputs"]] == [None, None, "binary file (a NUL byte at byte 7)",
                                                          "binary file (a NUL byte at byte 8)"]
    assert sorted(os.listdir("out/kept")) == ["a.txt"]


def test_only_binary_files_is_no_documents(cwd):
    """The message counts each kind of skip and offers no hint that cannot help (--input-format
    text reads a binary file no better); a .json document's hint only without the option."""
    put("d/x.bin", b"\x00\x01")
    put("d/y.bin", b"\x00\x02")
    ran = neardup("dedup", "d", "-o", "out")
    assert ran.returncode == 2
    assert ran.stderr.strip().splitlines()[-1] == "neardup: error: no documents in the input (2 files skipped: 2 binary)"
    put("d/z.json", '{\n  "a": 1\n}\n')
    ran = neardup("dedup", "d", "-o", "out")
    assert ran.stderr.strip().splitlines()[-1] == (
        "neardup: error: no documents in the input (3 files skipped: 2 binary, 1 not JSON Lines (.json); "
        "--input-format text reads every file as a document)")
    # the hint followed: the failed run's work is not in the way (it named id_column_auto before)
    ran = neardup("dedup", "d", "-o", "out", "--input-format", "text", "-q")
    assert ran.returncode == 0, ran.stderr


def test_walked_json_files_of_no_records_are_skipped_and_counted(cwd):
    """A folder of code holds package.json, pretty-printed fixtures and JSON values: a walked
    ``.json`` file whose first line is not a record with the text field is skipped and counted
    (as a binary file is); a walked ``.json`` of records is read as JSON Lines; a ``.jsonl`` file
    and a ``.json`` file named on its own keep the strict rules; a later bad line of a ``.json``
    file of records is a bad record as anywhere."""
    put("d/a.txt", words(1))
    put("d/package.json", '{\n  "name": "x",\n  "version": "1.0"\n}\n')
    put("d/one.json", '{"name": "x", "version": "1.0"}\n')
    put("d/list.json", '[1, 2, 3]\n')
    put("d/records.json", json.dumps({"text": words(2)}) + "\n" + json.dumps({"text": words(3)}) + "\n")
    srcs = {s.name: s for s in discover(["d"])}
    skipped = {name: [b.skipped for b in read_source(srcs[name])] for name in ("d/package.json", "d/one.json",
                                                                              "d/list.json")}
    assert skipped == {"d/package.json": ["not JSON Lines records (line 1 is not a JSON object: one JSON document?)"],
                       "d/one.json": ["not JSON Lines records (line 1 has no field 'text')"],
                       "d/list.json": ["not JSON Lines records (line 1 is a JSON list, not an object)"]}
    assert sum(len(b) for b in read_source(srcs["d/records.json"])) == 2
    ran = neardup("dedup", "d", "-o", "out")
    assert ran.returncode == 0, ran.stderr
    assert "3 .json files of no JSON Lines records skipped" in ran.stderr
    stats = json.load(open("out/stats.json"))
    assert stats["files"]["skipped_not_records"] == 3 and stats["counts"]["input"] == 3
    # named on its own, or a .jsonl file found by the walk: the strict rules
    with pytest.raises(InputError, match=r"^d/one.json:1: "):
        list(read_source(discover(["d/one.json"])[0]))
    put("e/one.jsonl", '{"name": "x"}\n' + json.dumps({"text": "y"}) + "\n")  # walked, first record without text
    assert [b.skipped for b in read_source(discover(["e"])[0])] == [
        "data file without the text field (line 1 has no field 'text')"]
    with pytest.raises(InputError, match=r"^e/one.jsonl:1: "):  # named: the strict rules
        list(read_source(discover(["e/one.jsonl"])[0]))
    put("f/records.json", json.dumps({"text": words(2)}) + "\n" + '{"name": "x"}\n')
    with pytest.raises(InputError, match=r"^f/records.json:2: "):
        list(read_source(discover(["f"])[0]))


# --------------------------------------------------------------------------- symbolic links


def test_link_to_a_file_of_the_input_is_read_once(cwd):
    put("lic/GPL-3", words(1))
    put("lic/Apache-2.0", words(2))
    os.symlink("GPL-3", "lic/GPL")  # as in every Debian common-licenses folder
    os.symlink("GPL-3", "lic/AAA")  # a link first in order: the file is still read under its own name
    srcs = discover(["lic"])
    assert [s.name for s in srcs] == ["lic/Apache-2.0", "lic/GPL-3"]
    assert srcs.links == {"read_once": 2, "not_followed": 0, "hard_links": 0}
    ran = neardup("dedup", "lic", "-o", "out")
    assert ran.returncode == 0, ran.stderr
    assert "2 symbolic links to files of the input read once" in ran.stderr
    assert json.load(open("out/stats.json"))["files"]["links_read_once"] == 2


def test_link_to_a_folder_of_the_input_is_read_once(cwd):
    put("d/sub/a.txt", words(1))
    os.symlink("sub", "d/alias")
    srcs = discover(["d"])
    assert [s.name for s in srcs] == ["d/sub/a.txt"] and srcs.links["read_once"] == 1


def test_links_leaving_the_input_are_not_followed_unless_asked(cwd):
    put("outside/secret.txt", words(3))
    put("outside/more/b.txt", words(4))
    put("d/a.txt", words(1))
    os.symlink(str(cwd / "outside" / "secret.txt"), "d/secret.txt")
    os.symlink(str(cwd / "outside" / "more"), "d/more")
    srcs = discover(["d"])
    assert [s.name for s in srcs] == ["d/a.txt"] and srcs.links == {"read_once": 0, "not_followed": 2, "hard_links": 0}
    srcs = discover(["d"], follow_symlinks=True)
    assert [s.name for s in srcs] == ["d/a.txt", "d/more/b.txt", "d/secret.txt"]
    # a link into another input is inside the input set
    assert [s.name for s in discover(["d", "outside"])] == ["d/a.txt", "outside/more/b.txt", "outside/secret.txt"]
    ran = neardup("dedup", "d", "-o", "out")
    assert ran.returncode == 0, ran.stderr
    assert "2 symbolic links leading out of the input not followed (--follow-symlinks)" in ran.stderr
    ran = neardup("dedup", "d", "-o", "out2", "--follow-symlinks", "-q")
    assert ran.returncode == 0 and json.load(open("out2/stats.json"))["counts"]["input"] == 3
    # a glob's matches obey the same rule
    assert [s.name for s in discover(["d/*.txt"])] == ["d/a.txt"]
    # a folder holding only such links says why it is empty
    os.makedirs("e")
    os.symlink(str(cwd / "outside" / "secret.txt"), "e/s.txt")
    with pytest.raises(InputError, match=r"^folder has no files: e \(1 symbolic link leading out of the inputs "
                                         r"not followed; --follow-symlinks follows them\)$"):
        discover(["e"])


def test_hard_links_are_decided_like_symbolic_links_read_once_counted_noted(cwd):
    """A system folder holds hard-linked files (bzip2, bunzip2 and bzcat are one binary): one file
    under two paths is read once, under its first path, counted and noted, never "same file
    reached twice" (mutation: drop the realpath test in io.sources._once -> the walk stops on the
    error)."""
    put("bin/bzip2", words(1))
    os.link("bin/bzip2", "bin/bunzip2")
    os.link("bin/bzip2", "bin/bzcat")
    put("bin/zstd", words(2))
    srcs = discover(["bin"])
    assert [s.name for s in srcs] == ["bin/bunzip2", "bin/zstd"]
    assert srcs.links == {"read_once": 0, "not_followed": 0, "hard_links": 2}
    ran = neardup("dedup", "bin", "-o", "out")
    assert ran.returncode == 0, ran.stderr
    assert "2 hard links to files of the input read once" in ran.stderr
    stats = json.load(open("out/stats.json"))
    assert stats["files"]["hard_links_read_once"] == 2 and stats["counts"]["input"] == 2
    # named on the command line, each path of the file is still a name of the same file: read once
    assert [s.name for s in discover(["bin/bzcat", "bin/bzip2"])] == ["bin/bzcat"]


def test_same_file_named_twice_without_a_link_is_still_an_error(cwd):
    put("d/a.txt", "x")
    with pytest.raises(InputError, match=r"^same file reached twice: d/a.txt$"):
        discover(["d", "d/a.txt"])


# --------------------------------------------------------------------------- empty files


def test_empty_data_files_are_zero_records_with_a_note(cwd):
    put("d/part-0.jsonl", json.dumps({"text": words(1)}) + "\n" + json.dumps({"text": words(2)}) + "\n")
    put("d/part-1.jsonl", b"")
    pq.write_table(pa.table({"text": pa.array([], pa.string())}), "d/part-2.parquet")
    put("d/empty.txt", b"")  # an empty text file is a valid (empty) document
    ran = neardup("dedup", "d", "-o", "out")
    assert ran.returncode == 0, ran.stderr
    assert "2 empty data files (no records)" in ran.stderr
    stats = json.load(open("out/stats.json"))
    assert stats["counts"]["input"] == 3 and stats["files"]["skipped_empty"] == 2
    assert [i.get("skipped") for i in stats["inputs"]] == [None, None, "empty file (no records)",
                                                          "empty file (no records)"]
    assert sorted(os.listdir("out/kept")) == ["empty.txt", "part-0.jsonl"]


# --------------------------------------------------------------------------- kept/ layout


def test_kept_mirrors_the_input_layout_whatever_the_glob(cwd):
    for p in ("data/2024/a/x.jsonl", "data/2024/b/x.jsonl", "data/2025/y.jsonl"):
        put(p, json.dumps({"text": words(hash(p) % 1000)}) + "\n")
    for pattern in ("data/**/*.jsonl", "./data/**/*.jsonl", str(cwd / "data") + "/**/*.jsonl"):
        srcs = discover([pattern])
        assert [s.relpath for s in srcs] == ["2024/a/x.jsonl", "2024/b/x.jsonl", "2025/y.jsonl"], pattern
    assert [s.relpath for s in discover(["data/2024/*/x.jsonl", "data/2025"])] == [
        "2024/a/x.jsonl", "2024/b/x.jsonl", "2025/y.jsonl"]
    ran = neardup("dedup", "data/**/*.jsonl", "-o", "out", "-q")
    assert ran.returncode == 0, ran.stderr
    kept = sorted(os.path.relpath(os.path.join(r, f), "out/kept") for r, _, fs in os.walk("out/kept") for f in fs)
    assert kept == ["2024/a/x.jsonl", "2024/b/x.jsonl", "2025/y.jsonl"]


# --------------------------------------------------------------------------- several text columns


def test_text_column_may_name_several_fields(cwd):
    put("d/a.csv", "id,body\n1," + words(1) + "\n2," + words(2) + "\n")
    put("d/b.jsonl", json.dumps({"text": words(1)}) + "\n" + json.dumps({"text": words(3)}) + "\n")
    pq.write_table(pa.table({"content": [words(4)], "body": [words(5)]}), "d/c.parquet")
    srcs = discover(["d"])
    texts = [t for s in srcs for b in read_source(s, text_column="body,text") for t in b.text.to_pylist()]
    assert texts == [words(1), words(2), words(1), words(3), words(5)]  # the first present wins: body in c
    texts = [t for s in srcs[2:] for b in read_source(s, text_column="content,body") for t in b.text.to_pylist()]
    assert texts == [words(4)]
    # none present: the first is reported missing (a file named on its own; a walked one is skipped)
    with pytest.raises(InputError, match=r"^d/b.jsonl:1: text field 'body' is missing"):
        list(read_source(discover(["d/b.jsonl"])[0], text_column="body,content"))
    for bad in ("body,,text", "body,body", ","):
        with pytest.raises(Exception, match="text_column"):
            list(read_source(srcs[1], text_column=bad))
    # the command line: comma-separated, or the flag repeated
    for flags in (["--text-column", "body,text"], ["--text-column", "body", "--text-column", "text"]):
        out = "out" + str(len(flags))
        ran = neardup("dedup", "d/a.csv", "d/b.jsonl", "-o", out, "-q", *flags)
        assert ran.returncode == 0, ran.stderr
        stats = json.load(open(f"{out}/stats.json"))
        assert stats["counts"]["input"] == 4 and stats["counts"]["removed"] == 1
        assert stats["params"]["text_column"] == "body,text"
    ran = neardup("dedup", "d", "-o", "bad", "--text-column", "body,,text")
    assert ran.returncode == 2 and "text_column must be field names separated by commas" in ran.stderr


# --------------------------------------------------------------------------- many small files


def test_read_sources_reads_runs_of_text_files_as_read_source_does(cwd, monkeypatch):
    from neardup.io import reader

    monkeypatch.setattr(reader, "_FILES_AHEAD", 3)  # the pool's window moves along the run
    for i in range(10):
        put(f"d/{i:02d}.txt", words(i))
    put("d/05b.bin", b"\x00x")
    put("d/06b.jsonl", json.dumps({"text": words(99)}) + "\n")
    put("d/07b.txt", "caf\xe9".encode("latin-1"))
    srcs = discover(["d"])
    members = list(range(len(srcs)))[1:]  # (any members, in their order)
    one_by_one = [b for i in members for b in read_source(srcs[i], i)]
    pooled = list(reader.read_sources(srcs, members))
    key = lambda b: (b.source_index, b.rows.tolist(), b.text.to_pylist(), b.skipped, b.rejected)
    assert [key(b) for b in pooled] == [key(b) for b in one_by_one]
    assert [b.skipped for b in pooled if b.skipped] == ["binary file (a NUL byte at byte 0)",
                                                         "not UTF-8 text (invalid UTF-8 at byte 3)"]
    # a file that is not a regular one is an error in its place, as read_source says it
    os.remove("d/03.txt")
    os.mkfifo("d/03.txt")
    with pytest.raises(InputError, match=r"^d/03.txt: not a regular file \(a named pipe\)$"):
        list(reader.read_sources(srcs, members))


def test_read_sources_groups_plain_text_files_into_batches_of_many_files(cwd, monkeypatch):
    import gzip

    from neardup.io import reader

    monkeypatch.setattr(reader, "_FILES_AHEAD", 4)
    monkeypatch.setattr(reader, "_FILES_A_TASK", 2)  # the tasks' bounds fall inside the groups
    for i in range(12):
        put(f"d/{i:02d}.txt", words(i))
    put("d/04b.bin", b"\x00x")
    put("d/06b.txt", gzip.compress(words(66).encode()))  # compressed: decompressed, read on its own
    put("d/07b.txt", "caf\xe9".encode("latin-1"))
    put("d/08b.txt", b"")
    srcs = discover(["d"])
    members = list(range(len(srcs)))[1:]
    def events(bs):  # documents and skipped files, in the order they come
        return [e for b in bs for e in ([(b.source_index, b.skipped)] if b.skipped else []) + [
            (int(si), int(r), t) for si, r, t in zip(b.sources if b.sources is not None else [b.source_index] * len(b),
                                                     b.rows.tolist(), b.text.to_pylist())]]
    one_by_one = [b for i in members for b in read_source(srcs[i], i, id_column="id")]
    grouped = list(reader.read_sources(srcs, members, group_files=True, batch_size=3, id_column="id"))
    assert events(grouped) == events(one_by_one)
    assert max(len(b) for b in grouped) == 3 and len(grouped) < len(one_by_one)
    ids = [i for b in grouped if len(b) for i in b.ids.to_pylist()]
    assert ids == [i for b in one_by_one if len(b) for i in b.ids.to_pylist()]
    os.remove("d/03.txt")
    os.mkfifo("d/03.txt")
    with pytest.raises(InputError, match=r"^d/03.txt: not a regular file \(a named pipe\)$"):
        list(reader.read_sources(srcs, members, group_files=True))


def test_documents_of_each_text_file_counted_in_stats(cwd):
    for i in range(6):
        put(f"d/{i}.txt", words(i))
    put("d/2b.bin", b"\x00x")
    ran = neardup("dedup", "d", "-o", "out", "-q")
    assert ran.returncode == 0, ran.stderr
    stats = json.load(open("out/stats.json"))
    assert [(i["name"], i["documents"]) for i in stats["inputs"]] == [
        ("d/0.txt", 1), ("d/1.txt", 1), ("d/2.txt", 1), ("d/2b.bin", 0), ("d/3.txt", 1), ("d/4.txt", 1),
        ("d/5.txt", 1)]


def test_kept_text_files_are_copied_whole(cwd):
    for i in range(30):
        put(f"d/s{i % 3}/{i:02d}.txt", words(i) + ("\n" if i % 2 else ""))
    put("d/s0/dup.txt", words(0))
    ran = neardup("dedup", "d", "-o", "out", "-q")
    assert ran.returncode == 0, ran.stderr
    for root, _, files in os.walk("d"):
        for name in files:
            rel = os.path.relpath(os.path.join(root, name), "d")
            if name == "dup.txt":
                assert not os.path.exists(os.path.join("out/kept", rel))
            else:
                assert open(os.path.join("out/kept", rel), "rb").read() == open(os.path.join(root, name), "rb").read()


def test_prefix_form_groups_list_a_folder_of_many_files_once_and_keep_its_links(tmp_path):
    """Guard: prefix_form_groups gives prefix_form's answer for every path, a folder of many
    files listed once for its symbolic links (mutation: take every listed name as no link -> the
    link resolves under its own folder, not its target's), the first path of each form (two
    names of one folder, one path twice), the others in order."""
    import os

    from neardup.io.storage.paths import prefix_form, prefix_form_groups

    (tmp_path / "d").mkdir()
    (tmp_path / "e").mkdir()
    (tmp_path / "e" / "x").write_text("x")
    for i in range(20):
        (tmp_path / "d" / f"f{i}").write_text("f")
    os.symlink(tmp_path / "e" / "x", tmp_path / "d" / "link")
    os.symlink(tmp_path / "d", tmp_path / "dl")
    paths = [str(tmp_path / "d" / f"f{i}") for i in range(20)] + [
        str(tmp_path / "d" / "link"), str(tmp_path / "dl" / "f3"), str(tmp_path / "d" / ".."),
        str(tmp_path / "d" / "gone"), "s3://bucket/a/b", "file://" + str(tmp_path / "d" / "f1"),
        str(tmp_path / "d" / "f2"), str(tmp_path / "d" / ".." / "e" / "x"), str(tmp_path / "d" / "link")] + [
        str(tmp_path / "dl" / f"n{i}") for i in range(16)] + [str(tmp_path / "d" / "n0")]  # d by a second name
    groups, others = prefix_form_groups(paths)
    forms = {i: form for i, form in others}
    for folder, (first, names) in groups.items():
        assert first == min(names.values())
        forms.update((i, folder + name + os.sep) for name, i in names.items())
    for i, p in enumerate(paths):  # each path's form, or (a path of a folder's name met before) an earlier one's
        assert forms[i] == prefix_form(p) if i in forms else prefix_form(p) in [forms[j] for j in forms if j < i]
    assert sorted(forms) == [i for i in range(len(paths)) if i not in (21, 25, 26, 28, 45)]  # met before
    assert [i for i, _ in others] == sorted(i for i, _ in others)
    assert forms[20] == str(tmp_path.resolve() / "e" / "x") + "/"
    assert len(groups) == 1 and list(groups.values())[0][0] == 0  # d, and dl/f3 under it


def test_overlap_by_folder_names_the_first_file_the_per_file_rule_names(tmp_path):
    """Guard: refuse_overlaps asks each folder of the files, not each file, and names the file
    that the rule file by file names: the first whose form starts with the folder checked
    (mutation: the folder's last file, not its first -> another file named)."""
    import os

    from neardup.io.storage.folder import Folder, overlapping
    from neardup.io.storage.paths import prefix_form

    for sub in ("a", "b", "a/c"):
        (tmp_path / sub).mkdir()
    for sub, n in (("a", 20), ("b", 20), ("a/c", 3)):
        for i in range(n):
            (tmp_path / sub / f"f{i:02d}").write_text("x")
    os.symlink(tmp_path / "b" / "f05", tmp_path / "a" / "link")
    os.symlink(tmp_path / "a", tmp_path / "al")
    files = ([str(tmp_path / "b" / f"f{i:02d}") for i in range(19, -1, -1)]
             + [str(tmp_path / "a" / f"f{i:02d}") for i in range(19, -1, -1)]
             + [str(tmp_path / "a" / "link"), str(tmp_path / "a" / "c" / "f01"), str(tmp_path / "al" / "f03")])
    checked = [tmp_path, tmp_path / "a", tmp_path / "b", tmp_path / "a" / "c", tmp_path / "al",
               tmp_path / "b" / "f05", tmp_path / "a" / "f07", tmp_path / "a" / "link",
               tmp_path / "a" / "c" / "f01", tmp_path / "elsewhere", tmp_path / "a" / "f0"]
    for path in checked:
        mine = prefix_form(str(path))
        expected = next((f for f in files if prefix_form(f).startswith(mine)), None)
        assert overlapping(Folder(str(path)), [], files) == expected, path
    assert overlapping(Folder(str(tmp_path / "b")), [], files) == files[0]
    assert overlapping(Folder(str(tmp_path / "b" / "f05")), [], files) == str(tmp_path / "b" / "f05")
