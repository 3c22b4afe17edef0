"""The run state's saves in the work dir (neardup.stages.workdir): the read plan written on one
line (the C encoder: a plan of 100,000 files indented took Python's encoder) and read back as
it was made."""

from __future__ import annotations

from neardup import Config
from neardup import io as nio
from neardup.stages import identity, workdir


def test_the_read_plan_is_one_line_read_back_whole(tmp_path):
    for i in range(40):
        (tmp_path / f"f{i:02d}.txt").write_text("x" * (10 + i))
    sources = nio.discover([str(tmp_path / "*.txt")])
    ident = identity.run_identity(Config().resolved(), sources)
    work = workdir.WorkDir(str(tmp_path / "work"), ident)
    blocks = work.plan(sources)
    raw = (tmp_path / "work" / workdir.PLAN).read_bytes()
    assert raw.count(b"\n") == 1 and raw.endswith(b"\n")
    assert sorted(i for b in blocks for i in b) == list(range(40))
    assert work.plan(sources) == blocks  # read back, not made again


def _identity():
    files = [[f"in/{i}.txt", f"/abs/in/{i}.txt", 10 + i, 1_700_000_000_000_000_000 + i] for i in range(50)]
    files.append(['in/é "q".txt', '/abs/in/é "q".txt', 3, 4])
    return {"config": {"threshold": 0.8, "against": [], "zeta": None}, "inputs": identity.Inputs(files),
            "extra": {"b": 1, "a": [1.5, "x"]}}


def test_the_fingerprint_is_the_hash_of_the_identitys_json_with_its_inputs_encoded_once():
    import hashlib
    import json

    ident = _identity()
    whole = hashlib.sha256(json.dumps(ident, sort_keys=True).encode()).hexdigest()
    assert identity.fingerprint(ident) == whole  # as every earlier neardup hashed it
    assert identity.fingerprint({**ident, "inputs": list(ident["inputs"])}) == whole
    ident["inputs"].__dict__["json"] = "[]"  # the JSON made once is the one used
    assert identity.fingerprint(ident) != whole


def test_inputs_json_holds_the_inputs_json_the_fingerprint_used(tmp_path):
    import json

    ident = _identity()
    workdir.WorkDir(str(tmp_path / "work"), ident)
    raw = (tmp_path / "work" / workdir.INPUTS).read_bytes()
    assert raw == (json.dumps(list(ident["inputs"]), sort_keys=True) + "\n").encode()
    ident["inputs"].__dict__["json"] = '["made once"]'
    workdir.WorkDir(str(tmp_path / "work2"), ident)
    assert (tmp_path / "work2" / workdir.INPUTS).read_bytes() == b'["made once"]\n'
