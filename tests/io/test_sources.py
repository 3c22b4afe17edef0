"""neardup.io.sources: discovering inputs (files, folders, globs), their names and where their
kept records go."""

from __future__ import annotations

import os

import pytest

from neardup.errors import ConfigError, InputError
from neardup.io import Source, discover, output_relpath, output_relpaths
from io_inputs import one, put


@pytest.mark.parametrize("fname,fmt,comp", [
    ("a.jsonl", "jsonl", None), ("a.json", "jsonl", None), ("a.jsonl.gz", "jsonl", "gzip"),
    ("a.json.gz", "jsonl", "gzip"), ("a.jsonl.zst", "jsonl", "zstd"), ("a.json.zst", "jsonl", "zstd"),
    ("a.jsonl.zstd", "jsonl", "zstd"), ("A.JSONL", "jsonl", None), ("a.parquet", "parquet", None),
    ("a.pq", "parquet", None), ("a.txt", "text", None), ("a.py", "text", None), ("README", "text", None),
])
def test_discover_format_from_name(cwd, fname, fmt, comp):
    put(fname, b"x")
    src = one(fname)
    assert (src.format, src.compression) == (fmt, comp)
    assert src.name == fname and src.relpath == fname and src.path == fname


def test_discover_folder_sorted_recursive_skips_hidden(cwd):
    for p in ["data/b.txt", "data/a/z.txt", "data/a/b/c.txt", "data/a.txt", "data/.hidden",
              "data/.git/config", "data/__pycache__/m.pyc", "data/pkg/__init__.py", "data/pkg/m.py"]:
        put(p, b"")
    srcs = discover(["data"])
    assert [s.name for s in srcs] == ["data/a/b/c.txt", "data/a/z.txt", "data/a.txt", "data/b.txt",
                                      "data/pkg/__init__.py", "data/pkg/m.py"]
    assert [s.relpath for s in srcs] == ["a/b/c.txt", "a/z.txt", "a.txt", "b.txt",
                                         "pkg/__init__.py", "pkg/m.py"]
    assert all(s.format == "text" for s in srcs)
    assert [s.name for s in discover(["data/"])] == [s.name for s in srcs]
    os.chdir("data")
    assert [s.name for s in discover(["."])][:2] == ["a/b/c.txt", "a/z.txt"]


def test_a_walk_is_in_the_order_of_the_path_components_not_of_the_paths(cwd):
    """The walk, depth first through each folder sorted by name, is the order of the path
    components with nothing sorted after it: "a/x" before "a-b/x" ('-' sorts before '/'), a
    folder reached by a link (outside) in its place (mutation: the walk's folders unsorted, or the paths
    sorted as strings -> another order)."""
    names = ["a/x", "a/y/z", "a-b/x", "a.txt", "a0", "b/a", "b-/c", "Q", "\u00e9/1", "z/a-b/c", "z/a/c"]
    for name in reversed(names):
        put(f"d/{name}", b"x")
    put("e/x", b"x")
    put("e/y/z", b"x")
    os.symlink(os.path.abspath("e"), "d/link")
    found = [s.relpath for s in discover(["d"], follow_symlinks=True)]
    expected = sorted(names + ["link/x", "link/y/z"], key=lambda r: r.split("/"))
    assert found == expected and found[:3] == ["Q", "a/x", "a/y/z"]


def test_discover_globs(cwd):
    for p in ["d/2.jsonl", "d/1.jsonl", "d/x.txt", "d/sub/3.jsonl", "e/4.jsonl"]:
        put(p, b"{}\n")
    assert [s.name for s in discover(["d/*.jsonl"])] == ["d/1.jsonl", "d/2.jsonl"]
    assert [s.name for s in discover(["d/**/*.jsonl"])] == ["d/1.jsonl", "d/2.jsonl", "d/sub/3.jsonl"]
    # kept/ mirrors the inputs' layout below their longest common folder, whatever the glob
    assert [s.relpath for s in discover(["d/*.jsonl", "e/*.jsonl"])] == ["d/1.jsonl", "d/2.jsonl", "e/4.jsonl"]
    assert [s.relpath for s in discover(["d/*.jsonl"])] == ["1.jsonl", "2.jsonl"]
    assert [s.relpath for s in discover(["d/**/*.jsonl"])] == ["1.jsonl", "2.jsonl", "sub/3.jsonl"]
    assert [s.relpath for s in discover(["./d/**/*.jsonl", "e"])] == ["d/1.jsonl", "d/2.jsonl", "d/sub/3.jsonl",
                                                                        "e/4.jsonl"]
    # a folder matched by a plain glob is walked; with ** its files are matched already
    assert [s.name for s in discover(["d/s*"])] == ["d/sub/3.jsonl"]
    assert [s.name for s in discover(["d/**"])] == ["d/1.jsonl", "d/2.jsonl", "d/sub/3.jsonl", "d/x.txt"]


def test_discover_errors(cwd):
    put("d/a.jsonl", b"{}\n")
    put("empty/.hidden", b"x")
    os.makedirs("nothing")
    cases = {
        "missing.jsonl": "no such file or folder: missing.jsonl",
        "d/*.parquet": "no such file or folder: d/*.parquet (the pattern matches nothing)",
        "empty": "folder has no files: empty",
        "nothing": "folder has no files: nothing",
    }
    for inp, msg in cases.items():
        with pytest.raises(InputError) as ei:
            discover([inp])
        assert str(ei.value) == msg
    with pytest.raises(InputError, match="no input given"):
        discover([])
    with pytest.raises(InputError, match=r"^same file reached twice: d/a.jsonl$"):
        discover(["d", "d/a.jsonl"])
    os.symlink("a.jsonl", "d/link.jsonl")  # a link to a file of the input: read once (discover_links)
    assert [s.name for s in discover(["d"])] == ["d/a.jsonl"]


def test_discover_relpath_collisions(cwd):
    put("x/a.jsonl", b"{}\n")
    put("y/a.jsonl", b"{}\n")
    put("y/B.txt", b"t")
    put("z/b.txt", b"t")
    put("w/c.txt", b"t")
    # paths below the inputs' longest common folder: no collision
    srcs = discover(["x/a.jsonl", "y/a.jsonl", "w/c.txt"])
    assert [s.relpath for s in srcs] == ["x/a.jsonl", "y/a.jsonl", "w/c.txt"]
    assert [s.relpath for s in discover(["y/B.txt", "z/b.txt"])] == ["y/B.txt", "z/b.txt"]
    assert [s.relpath for s in discover(["x", "y/a.jsonl"])] == ["x/a.jsonl", "y/a.jsonl"]
    os.makedirs("sub/x")
    put("sub/x/a.jsonl", b"{}\n")
    os.chdir("sub")
    srcs = discover(["../y/a.jsonl", "x/a.jsonl"])
    assert [s.relpath for s in srcs] == ["y/a.jsonl", "sub/x/a.jsonl"]
    assert srcs[0].name == "../y/a.jsonl"
    # however a path is typed
    assert [s.relpath for s in discover(["../x/a.jsonl", "x/a.jsonl"])] == ["x/a.jsonl", "sub/x/a.jsonl"]
    assert [s.relpath for s in discover([str(cwd / "x" / "a.jsonl"), "./x/a.jsonl"])] == ["x/a.jsonl",
                                                                                         "sub/x/a.jsonl"]


def test_output_relpath():
    mk = lambda rel, fmt, comp=None: Source(path=rel, name=rel, relpath=rel, format=fmt, compression=comp)
    assert output_relpath(mk("d/a.jsonl.gz", "jsonl", "gzip"), "same") == "d/a.jsonl.gz"
    assert output_relpath(mk("d/a.jsonl.gz", "jsonl", "gzip"), "jsonl") == "d/a.jsonl"
    assert output_relpath(mk("d/a.JSON.zst", "jsonl", "zstd"), "parquet") == "d/a.parquet"
    assert output_relpath(mk("a.pq", "parquet"), "jsonl") == "a.jsonl"
    assert output_relpath(mk("a.parquet", "parquet"), "parquet") == "a.parquet"
    assert output_relpath(mk("pkg/m.py", "text"), "same") == "pkg/m.py"
    assert output_relpath(mk("pkg/m.py", "text"), "jsonl") == "pkg/m.py.jsonl"
    with pytest.raises(ConfigError):
        output_relpath(mk("a.jsonl", "jsonl"), "csv")
    clash = [mk("a.json", "jsonl"), mk("a.jsonl", "jsonl")]
    assert output_relpaths(clash, "same") == ["a.json", "a.jsonl"]
    with pytest.raises(InputError, match="same output name 'a.jsonl'"):
        output_relpaths(clash, "jsonl")


def test_relatives_equal_relative_to_for_odd_paths(tmp_path, monkeypatch):
    """discover's relpaths made with each folder's abspath once equal relative_to's, path by path
    (the root folder, ``//``, ``..`` and ``.`` parts, a trailing slash, relative paths)."""
    from neardup.io import discovery as S

    monkeypatch.chdir(tmp_path)
    paths = ["/a", "//x/b", "//c", "///c", "/tmp/../tmp/d", "./e", "f/", "g/.", "h/..", "i/j/../k", "l//m",
             str(tmp_path / "n" / "o"), "p", "file:///q/r", "s3://b/t/u"]
    for root in ["/", "/tmp", str(tmp_path), str(tmp_path / "n"), "//x", None]:
        assert S._relatives(paths, root) == [S._relative(p, root) for p in paths], root


def test_discover_gives_the_collector_back_as_it_was(tmp_path):
    import gc

    (tmp_path / "a.txt").write_text("x")
    was = gc.isenabled()
    try:
        for state in (True, False):
            (gc.enable if state else gc.disable)()
            discover([str(tmp_path)])
            assert gc.isenabled() is state
    finally:
        (gc.enable if was else gc.disable)()


@pytest.mark.parametrize("input_format", ["auto", "text"])
def test_discover_makes_the_sources_the_constructor_makes(cwd, input_format):
    """discover makes its Sources without the frozen dataclass's __init__ (make_source): equal to
    Source(...), the same fields in the same order (pickled the same), frozen still. Mutation:
    ``table=None`` left out, or two fields swapped in make_source -> not the same."""
    import dataclasses
    import pickle

    for p in ["data/a.txt", "data/b/c.jsonl.gz", "data/d.parquet"]:
        put(p, b"x")
    srcs = discover(["data"], input_format=input_format)
    made = [Source(path=s.path, name=s.name, relpath=s.relpath, format=s.format, compression=s.compression,
                   walked=s.walked) for s in srcs]
    assert [s.format for s in srcs] == (["text", "jsonl", "parquet"] if input_format == "auto" else ["text"] * 3)
    assert srcs == made and all(s.walked for s in srcs)
    assert [list(vars(s).items()) for s in srcs] == [list(vars(s).items()) for s in made]
    assert pickle.dumps(list(srcs)) == pickle.dumps(made)
    with pytest.raises(dataclasses.FrozenInstanceError):
        srcs[0].path = "other"


def _clashing_by_pairs(relpaths):
    """The definition: equal ignoring case, or one a folder of the other."""
    keys = [r.casefold() for r in relpaths]
    return {i for i, a in enumerate(keys) for j, b in enumerate(keys)
            if i != j and (a == b or b.startswith(a + "/") or a.startswith(b + "/"))}


@pytest.mark.parametrize("relpaths", [
    ["a/b.txt", "a/c.txt", "d/e/f.txt", "g.txt"],          # none: the sets' answer
    ["a/b.txt", "A/B.txt", "c.txt"],                         # equal ignoring case
    ["a/b", "a/b/c.txt", "x/y.txt"],                         # a file named as another's folder
    ["d", "d/e/f/g.txt", "d/e/h.txt", "z.txt"],              # a file named as a folder further up
    ["p/q/r.txt", "p/Q", "p/q/s.txt"],                       # a deeper one, ignoring case
    [], ["one.txt"],
])
def test_clashing_names_are_those_of_the_definition(relpaths):
    """Mutation: the sets' check without the folders (``unique.isdisjoint(folders)`` -> True)
    answers none for the folder cases."""
    from neardup.io.sources import _clashing
    assert _clashing(relpaths) == _clashing_by_pairs(relpaths)


def test_relatives_made_once_a_folder_equal_relative_to(tmp_path, monkeypatch):
    """_relatives takes each folder's relative form once (from its cache when the folder comes
    back): path by path as relative_to makes it, for the files of folders inside and outside
    the root, one after another and interleaved, the plain and the odd names of one folder; one
    _below a folder. Mutations: the folder's form not kept (``below = heads[head] = _below(..)``
    -> ``below = _below(..)``) -> _below called again; "." and ".." names joined as plain ones
    -> unequal."""
    from neardup.io import discovery as S

    monkeypatch.chdir(tmp_path)
    paths = ["/r/a/1", "/r/a/2", "/r/b/3", "/r/a/4", "/r/a/.", "/r/a/..", "/r/a/5", "/s/6", "/s/7", "/r/8",
             "/r/b/9", "rel/10", "rel/11", "s3://b/t/12", "s3://b/t/13", "file:///r/a/14", "/r/a/15"]
    calls = []
    below = S._below
    monkeypatch.setattr(S, "_below", lambda head, *a: calls.append(head) or below(head, *a))
    for root in ["/r", "/r/a", "/", str(tmp_path), "/s"]:
        calls.clear()
        assert S._relatives(paths, root) == [S._relative(p, root) for p in paths], root
        assert sorted(calls) == sorted({p.rpartition("/")[0] for p in paths}), root


def test_walk_makes_the_found_the_named_tuple_makes(tmp_path):
    """_walk_folder makes each _Found as a plain tuple (no named tuple's __new__ a file): equal to
    the _Found made by its constructor, field by field (the name prefixed, walked, via a link or
    not, not remote). Mutations: ``via_link`` and ``walked`` swapped in the tuple, or the walk
    started from "" instead of ``prefix`` -> unequal."""
    from neardup.io import discovery as S

    d = tmp_path / "d"
    (d / "a").mkdir(parents=True)
    (d / "a" / "b.txt").write_text("x")
    (d / "c.txt").write_text("y")
    (d / "l.txt").symlink_to(d / "c.txt")  # a link to a file inside the inputs: followed, via a link
    got = S._walk_folder(str(d), roots=[os.path.realpath(d)], follow_symlinks=False, prefix="P/")
    want = [S._Found(str(d / "a" / "b.txt"), "P/a/b.txt", walked=True),
            S._Found(str(d / "c.txt"), "P/c.txt", walked=True),
            S._Found(str(d / "l.txt"), "P/l.txt", walked=True, via_link=True)]
    assert got == want
    assert [f._asdict() for f in got] == [f._asdict() for f in want] and all(type(f) is S._Found for f in got)


@pytest.mark.parametrize("names", [
    ["a.jsonl", "b.json.gz", "c.jsonl.zst", "D.JSONL", "e.parquet", "f.pq.gz", "g.txt", "h.tar.gz", "README",
     ".hidden", ".x.jsonl", "dot.", "two..jsonl", "a.b.c.csv", "t.TSV.XZ", "x.tar", "y.jsonl.zstd", "z.txt.zst"],
    ["Ä.jsonl", "ß.JSON.GZ", "İ.txt", "x.ΣΣ"],  # not ASCII: each path asked on its own
])
def test_formats_asked_once_an_ending_are_those_of_each_name(names):
    """discover's format of each file, asked once an ending (``_formats``), is detect_format's
    of each file name. Mutation: the ending of a name with one dot cut from the second last dot
    (``base[before:]`` whatever ``before``) -> ``a.jsonl`` taken as text."""
    from neardup.io.discovery import _formats
    from neardup.io.sources import detect_format

    paths = [f"/data/sub/{n}" for n in names] + [f"rel/{n}" for n in names] + names
    assert _formats(paths) == [detect_format(p.rpartition("/")[2]) for p in paths]


def test_names_shown_at_once_are_those_shown_one_by_one():
    """``_shown`` leaves plain names as they are, and shows the others as display_name does.
    Mutation: the URL check left out -> a password shown."""
    from neardup.io.discovery import _shown
    from neardup.io.sources import display_name

    plain = ["a/b.txt", "c.jsonl"]
    assert _shown(list(plain)) == plain
    for odd in (plain + ["s3://user:secret@bucket/x.txt"], plain + ["bad\udcff.txt"]):
        assert _shown(list(odd)) == [display_name(n) for n in odd]
        assert "secret" not in "".join(_shown(list(odd))) and "\udcff" not in "".join(_shown(list(odd)))
