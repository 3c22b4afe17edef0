"""The member and pair work files, Parquet (zstd) against Arrow IPC (uncompressed), in one process
(CPU seconds of the process, pyarrow's threads included, the two formats alternating): what the pairs, clusters and write
stages do with them at one corpus size, from a finished work dir of an earlier layout (6, Parquet
parts) that ``--work-dir`` kept:

- the pairs part written and read back (clusters stage);
- the members part written (clusters stage), read twice (removed rows, every member);
- the removed range sorted and written, the clusters range sorted and written;
- clusters.parquet stitched from its range (the output: the same bytes from either, checked);
- the removed range's source and row read (the kept/ writers).

    .venv/bin/python bench/work_files.py --work-dir /tmp/w1m --repeat 6 --out bench/results/work_files_1m.json
"""

from __future__ import annotations

import argparse
import filecmp
import os
import shutil
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "src"))
from common import run_header, write_json  # noqa: E402

from neardup.io.storage import tables as T  # noqa: E402
from neardup.stages.workdir import MEMBERS_SCHEMA  # noqa: E402
from neardup.stages.write import CLUSTERS_SCHEMA, cluster_records  # noqa: E402


def flow(ext: str, pairs, members, d: str) -> None:
    def write(t, p):
        if ext == "parquet":
            T.write_parquet(t, p)
        else:
            T.write_arrow(t, p, max_chunksize=T.ROW_GROUP)

    write(pairs, f"{d}/pairs.{ext}")
    T.read_table(f"{d}/pairs.{ext}")
    write(members, f"{d}/m.{ext}")
    m = T.read_table(f"{d}/m.{ext}")
    removed = m.filter(m.column("removed")).select(MEMBERS_SCHEMA.names).cast(MEMBERS_SCHEMA).sort_by("doc")
    write(removed, f"{d}/r.{ext}")
    m = T.read_table(f"{d}/m.{ext}")
    every = m.select(["doc", "cluster", "id", "cluster_id", "removed"])
    write(cluster_records(every.sort_by([("cluster", "ascending"), ("doc", "ascending")])), f"{d}/c.{ext}")
    T.stitch_parquet(f"{d}/clusters-{ext}.parquet", CLUSTERS_SCHEMA, [f"{d}/c.{ext}"])
    T.read_table(f"{d}/r.{ext}", ["source", "row"])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--work-dir", required=True, help="a kept work dir of layout 6 (pairs/ and clusters/ Parquet parts)")
    ap.add_argument("--repeat", type=int, default=6)
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    pairs = T.read_table(os.path.join(args.work_dir, "pairs", "part-00000.parquet"))
    members = T.read_table(os.path.join(args.work_dir, "clusters", "part-00000.parquet"))
    d = tempfile.mkdtemp(prefix="work_files_")
    cpu = {"parquet": [], "arrow": []}
    sizes = {}
    try:
        for _ in range(args.repeat):
            for ext in cpu:
                t0 = time.process_time()
                flow(ext, pairs, members, d)
                cpu[ext].append(round(time.process_time() - t0, 4))
        same = filecmp.cmp(f"{d}/clusters-parquet.parquet", f"{d}/clusters-arrow.parquet", shallow=False)
        for ext in cpu:
            sizes[ext] = {n: os.path.getsize(f"{d}/{n}.{ext}") for n in ("pairs", "m", "r", "c")}
    finally:
        shutil.rmtree(d, ignore_errors=True)
    result = {**run_header(sys.argv), "pairs_rows": pairs.num_rows, "member_rows": members.num_rows,
              "cpu_s": cpu, "cpu_s_min": {k: min(v) for k, v in cpu.items()}, "bytes": sizes,
              "clusters_parquet_same_bytes": same, "load_average_at_end": os.getloadavg()}
    write_json(args.out, result)
    print({k: min(v) for k, v in cpu.items()}, "same bytes" if same else "DIFFERENT BYTES", sizes)


if __name__ == "__main__":
    main()
