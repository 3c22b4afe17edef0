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
