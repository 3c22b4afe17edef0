"""What a refused work dir says differs between two runs: the options a user gives, never
neardup's own notes (``id_column_auto``, how the id column was chosen)."""

from __future__ import annotations

from neardup.stages.identity import differences


def test_differences_name_no_internal_field():
    old = {"inputs": [], "config": {"id_column": "id", "id_column_auto": True, "input_format": "auto"}}
    new = {"inputs": [], "config": {"id_column": None, "id_column_auto": False, "input_format": "text"}}
    assert differences(old, new) == ["id_column", "input_format"]
    assert differences({"inputs": [1], "config": {}}, {"inputs": [2], "config": {}}) == ["inputs"]


def test_identity_takes_each_files_size_and_mtime_from_discover_and_sees_a_touched_file(tmp_path):
    """Guard: run_identity takes the (size, mtime_ns) discover's stat found (mutation: record
    ``st_ctime_ns`` there, or a size of 0 -> the inputs differ from os.stat's); a file touched
    (its mtime only) makes the inputs differ, the changed input a resume must see."""
    import os

    from neardup.config import Config
    from neardup.io.discovery import discover
    from neardup.stages.identity import run_identity

    for i in range(3):
        (tmp_path / f"{i}.txt").write_text(f"document {i}")
        os.utime(tmp_path / f"{i}.txt", ns=(10**18, 10**18 + i))  # an mtime that is not the ctime
    sources = discover([str(tmp_path)])
    assert len(sources.file_stats) == 3
    config = Config()
    first = run_identity(config, sources)
    stats = [os.stat(s.path) for s in sources]
    assert [f[2:] for f in first["inputs"]] == [[st.st_size, st.st_mtime_ns] for st in stats]
    os.utime(sources[1].path, ns=(stats[1].st_atime_ns, stats[1].st_mtime_ns + 10**9))
    again = run_identity(config, discover([str(tmp_path)]))
    assert differences(first, again) == ["inputs"]


def test_a_run_hashes_its_identity_once_for_the_output_and_the_work_dir(tmp_path, monkeypatch):
    """The output folder's marker and the work dir's state.json record one fingerprint, hashed
    once (100,000 inputs: a hash is 0.08 CPU-s). Mutation: WorkDir not given the run's
    fingerprint -> two hashes."""
    import json

    import neardup
    from neardup.stages import identity, workdir

    real = identity.fingerprint
    hashed = []

    def counted(value):
        hashed.append(value)
        return real(value)

    monkeypatch.setattr(identity, "fingerprint", counted)
    monkeypatch.setattr(workdir, "fingerprint", counted)
    for i in range(3):
        (tmp_path / "in").mkdir(exist_ok=True)
        (tmp_path / "in" / f"{i}.txt").write_text(f"document number {i} " * 5)
    neardup.dedup(str(tmp_path / "in"), output=str(tmp_path / "out"), work_dir=str(tmp_path / "work"))
    assert len(hashed) == 1
    run = json.loads((tmp_path / "out" / ".neardup").read_text())["run"]
    assert run == real(hashed[0])
    assert json.loads((tmp_path / "work" / "state.json").read_text())["fingerprint"] == run


def test_inputs_json_made_beside_discover_is_json_dumps_and_odd_paths_go_one_by_one(tmp_path, monkeypatch):
    """Guard: the inputs' JSON that discover's stat thread makes (kernels.inputsjson) is byte for
    byte ``json.dumps(rows, sort_keys=True)`` of the rows run_identity makes one by one (mutation:
    a separator of the kernel changed -> differs), and a folder holding a path JSON escapes (a
    quote, a backslash, a tab, non-ASCII) leaves it to the rows one by one (mutation: drop the
    kernel's quote check -> its JSON is not json.dumps'); sources that are not discover's files in
    its order, or a file whose name is not its path, are encoded one by one too."""
    import json

    from neardup.config import Config
    from neardup.io import discovery
    from neardup.io.sources import Sources
    from neardup.stages.identity import _plain_inputs, fingerprint, run_identity

    monkeypatch.setattr(discovery, "_STAT_BESIDE_FROM", 2)
    folder = tmp_path / "in"
    (folder / "sub").mkdir(parents=True)
    for i in range(5):
        (folder / ("sub" if i % 2 else "") / f"doc {i}.txt").write_text(f"document {i}" * (i + 1))
    sources = discovery.discover([str(folder)])
    plain = _plain_inputs(sources)
    assert plain is not None and plain.json == json.dumps(list(plain), sort_keys=True)
    slow = run_identity(Config(), Sources(sources, file_stats=sources.file_stats))
    assert slow["inputs"] == plain and slow["inputs"].json == plain.json
    assert fingerprint(run_identity(Config(), sources)) == fingerprint(slow)
    assert _plain_inputs(Sources(sources[1:], file_stats=sources.file_stats)) is None
    for odd in ('say "hi".txt', "back\\slash.txt", "tab\there.txt", "caf\u00e9.txt"):
        (folder / odd).write_text("odd")
        made = discovery.discover([str(folder)])
        assert made.inputs_json is None and _plain_inputs(made) is None, odd
        inputs = run_identity(Config(), made)["inputs"]
        assert inputs.json == json.dumps(list(inputs), sort_keys=True)
        (folder / odd).unlink()
    monkeypatch.chdir(folder)
    here = discovery.discover(["."])  # names "doc 0.txt", paths "./doc 0.txt"
    assert here.inputs_json is not None and _plain_inputs(here) is None
    assert run_identity(Config(), here)["inputs"][0][:2] == ["doc 0.txt", "./doc 0.txt"]
