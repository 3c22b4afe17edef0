"""DocStore keeps a local work dir's shards open: each block's Arrow file is opened once for every
stage that reads its columns, with the values of a file opened anew; a pickled store (a Ray
task's) holds none."""

import os
import pickle

import numpy as np
import pyarrow as pa

from neardup import io as nio
from neardup.config import Config
from neardup.engines.local import LocalEngine
from neardup.io.storage.folder import Folder
from neardup.stages import Run
from neardup.stages.corpus import DocStore
from neardup.stages.read import ReadStage
from neardup.stages.workdir import WorkDir, block_name

EXAMPLE = os.path.join(os.path.dirname(__file__), "..", "..", "examples", "corpus.jsonl")


def test_a_local_shard_is_opened_once_for_every_read_of_it(tmp_path, monkeypatch):
    from neardup.stages import workdir as wd
    monkeypatch.setattr(wd, "BLOCK_BYTES", 1)  # a block per input file
    lines = open(EXAMPLE).readlines()
    paths = []
    for i in range(3):
        paths.append(str(tmp_path / f"part{i}.jsonl"))
        with open(paths[-1], "w") as f:
            f.writelines(lines[i::3])
    config = Config(keep="longest", id_column="id").resolved()
    work = WorkDir(str(tmp_path / "work"), "shard-cache-test")
    run = Run(config=config, sources=nio.discover(paths), work=work, output=Folder.of(tmp_path / "out"), quiet=True)
    work.mark_done("read", ReadStage().run(run, LocalEngine()))
    blocks = len(run.corpus.blocks)
    assert blocks == 3
    opened = []
    read_table = Folder.read_table
    monkeypatch.setattr(Folder, "read_table", lambda self, name, columns=None: opened.append(name) or
                        read_table(self, name, columns))
    store = DocStore(work.folder, run.corpus.block_start, config.num_perm, run.corpus.row_base)
    docs = np.arange(0, run.corpus.n, 3)
    for _ in range(2):
        values, _ids = store.columns_and_ids(docs, ["source", "row", "length"], True)
        counts = [store.table(b, ["count"]).column(0) for b in range(blocks)]
    assert sorted(opened) == sorted(block_name(b, "arrow") for b in range(blocks))
    for b in range(blocks):  # the values of each file opened anew
        with pa.memory_map(work.folder.join(block_name(b, "arrow"))) as f:
            assert pa.ipc.open_file(f).read_all().column("count").equals(counts[b])
    assert np.array_equal(values["length"], store.columns(docs, ["length"])["length"])
    assert not pickle.loads(pickle.dumps(store))._mapped
