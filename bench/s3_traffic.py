"""Bytes each stage moves to and from the work directory on object storage, on the three-node
test cluster of tests/engines/test_ray_cluster.py (``ray.cluster_utils.Cluster``, one CPU a node) with
inputs, work dir and output on a local S3 server (moto), through a counting HTTP proxy.

    .venv/bin/python bench/s3_traffic.py --docs 20000 [--verify exact] [--nodes 3]

The proxy sits between every S3 client (driver and workers: ``AWS_ENDPOINT_URL`` points at it)
and moto; it counts request bodies (uploads) and response bodies (downloads) per stage and per
work-dir prefix. The stage is the one running: the proxy reads each state.json the driver
uploads (a stage is done when it appears in "done"). Ray's own transfers (shuffles through the
object store) do not go through S3 and are not counted here. Prints a table and writes
bench/results/s3_traffic.json.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import sys
import threading
import time
from collections import defaultdict
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))
sys.path.insert(0, str(HERE))

STAGES = ("read", "pairs", "clusters", "write")
counts = defaultdict(lambda: [0, 0, 0])  # (stage, what) -> [bytes up, bytes down, requests]
current = {"stage": "start"}
lock = threading.Lock()


def _what(path: str) -> str:
    p = path.split("?", 1)[0]
    for part in ("/work/read/", "/work/pairs/", "/work/clusters/", "/work/state.json", "/in/", "/out/"):
        if part in p:
            name = part.strip("/").replace("work/", "work:")
            if part == "/work/read/":
                ext = p.rsplit(".", 1)[-1]
                return f"work:read/*.{ext}"
            return name
    return "other"


class Proxy(BaseHTTPRequestHandler):
    upstream = ("127.0.0.1", 0)
    protocol_version = "HTTP/1.1"

    def log_message(self, *a):
        pass

    def _forward(self):
        n = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(n) if n else b""
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            chunks = []
            while True:
                size = int(self.rfile.readline().strip(), 16)
                if size == 0:
                    self.rfile.readline()
                    break
                chunks.append(self.rfile.read(size))
                self.rfile.readline()
            body = b"".join(chunks)
        conn = http.client.HTTPConnection(*self.upstream, timeout=120)
        headers = {k: v for k, v in self.headers.items() if k.lower() not in ("transfer-encoding",)}
        if body or self.command in ("PUT", "POST"):
            headers["Content-Length"] = str(len(body))
        conn.request(self.command, self.path, body=body, headers=headers)
        resp = conn.getresponse()
        data = resp.read()
        if self.command == "PUT" and self.path.split("?")[0].endswith("/work/state.json") and resp.status == 200:
            try:
                done = json.loads(body)["done"]
                nxt = next((s for s in STAGES if s not in done), "end")
                with lock:
                    current["stage"] = nxt
            except Exception:
                pass
        with lock:
            c = counts[(current["stage"], _what(self.path))]
            c[0] += len(body)
            c[1] += len(data) if self.command == "GET" else 0
            c[2] += 1
        self.send_response(resp.status)
        for k, v in resp.getheaders():
            if k.lower() not in ("transfer-encoding", "content-length", "connection"):
                self.send_header(k, v)
        # a HEAD answer keeps the object's length (it has no body)
        self.send_header("Content-Length", resp.getheader("Content-Length", "0") if self.command == "HEAD"
                         else str(len(data)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)
        conn.close()

    do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = _forward


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--docs", type=int, default=20000)
    ap.add_argument("--verify", default="exact")
    ap.add_argument("--nodes", type=int, default=3)
    ap.add_argument("--files", type=int, default=8)
    args = ap.parse_args()

    from moto.server import ThreadedMotoServer
    from helpers import S3, free_port, s3_env

    port = free_port()
    import logging
    logging.getLogger("werkzeug").setLevel(logging.WARNING)
    srv = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    srv.start()
    Proxy.upstream = ("127.0.0.1", port)
    pport = free_port()
    proxy = ThreadingHTTPServer(("127.0.0.1", pport), Proxy)
    threading.Thread(target=proxy.serve_forever, daemon=True).start()
    endpoint = f"http://127.0.0.1:{pport}"
    os.environ.update(s3_env(endpoint))
    s3 = S3(endpoint, "bench")
    s3.client.create_bucket(Bucket="bench")

    from common import ensure_corpus
    corpus = ensure_corpus(args.docs, 0)
    lines = Path(corpus["path"]).read_bytes().splitlines(keepends=True)
    per = -(-len(lines) // args.files)
    for i in range(args.files):
        s3.put(f"in/part-{i:02d}.jsonl", b"".join(lines[i * per:(i + 1) * per]))
    in_bytes = Path(corpus["path"]).stat().st_size

    from ray.cluster_utils import Cluster

    import neardup
    from neardup.stages import workdir
    workdir.BLOCK_BYTES = (in_bytes // args.files) + 1  # one block a file: a task a node and more
    node = dict(num_cpus=1, object_store_memory=200 << 20)
    cluster = Cluster(initialize_head=True, connect=False, head_node_args=dict(node, include_dashboard=False))
    for _ in range(args.nodes - 1):
        cluster.add_node(**node)
    cluster.wait_for_nodes()
    counts.clear()
    current["stage"] = "start"
    t0 = time.time()
    res = neardup.dedup(s3.url("in/"), output=s3.url("out"), engine="ray", ray_address=cluster.address,
                        work_dir=s3.url("work"), verify=args.verify, quiet=True, keep_work=True)
    wall = time.time() - t0
    sizes = defaultdict(int)
    for k in s3.keys("work/"):
        head = s3.client.head_object(Bucket="bench", Key=k)
        sizes[_what("/" + k)] += head["ContentLength"]
    cluster.shutdown()
    n = res.stats["counts"]["input"]
    rows = []
    print(f"{n:,} documents ({in_bytes / n:,.0f} B of JSONL each), verify={args.verify}, {args.nodes} nodes, "
          f"{wall:.1f} s; seconds {res.stats['seconds']}")
    print(f"{'stage':<9} {'object':<22} {'up B/doc':>9} {'down B/doc':>10} {'requests':>8}")
    for (stage, what), (up, down, reqs) in sorted(counts.items(), key=lambda x: (
            (list(STAGES) + ["start", "end"]).index(x[0][0]) if x[0][0] in STAGES + ("start", "end") else 9, x[0][1])):
        rows.append({"stage": stage, "object": what, "up": up, "down": down, "requests": reqs})
        print(f"{stage:<9} {what:<22} {up / n:>9.1f} {down / n:>10.1f} {reqs:>8}")
    print("work dir at the end, bytes per document:", {k: round(v / n, 1) for k, v in sorted(sizes.items())})
    out = HERE / "results" / ("s3_traffic.json" if args.docs == 20000 else f"s3_traffic_{args.docs}.json")
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps({"documents": n, "input_bytes": in_bytes, "verify": args.verify, "nodes": args.nodes,
                               "wall_s": wall, "seconds": res.stats["seconds"], "traffic": rows,
                               "work_dir_bytes": dict(sizes)}, indent=1))
    proxy.shutdown()
    srv.stop()


if __name__ == "__main__":
    main()
