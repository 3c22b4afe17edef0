"""A/B of the JSONL texts' pool: read_source (text_spans=False: texts gathered into the pool)
over a file, batches held `hold` deep (as a consumer hashing a few blocks behind), in a fresh
process per tree, alternating. CPU = user+sys of the child."""
import json, os, subprocess, sys, time, resource
TREES = {"base52": "/work/wt-base52/src", "onepool": "/tmp/tidy23/onepool/src"}
PY = "/work/main/.venv/bin/python"
CHILD = r'''
import sys, time, os, resource, collections
import neardup.io as nio
from neardup.kernels import jsonl as J
path, hold = sys.argv[1], int(sys.argv[2])
src = nio.discover([path])[0]
for b in nio.read_source(src, 0, text_column="text", batch_size=1 << 30):  # warm: kernels loaded
    break
r0 = resource.getrusage(resource.RUSAGE_SELF); t0 = time.perf_counter()
q = collections.deque(maxlen=hold); n = 0
for b in nio.read_source(src, 0, text_column="text", id_column="id", batch_size=8192):
    q.append(b); n += len(b.rows)
t1 = time.perf_counter(); r1 = resource.getrusage(resource.RUSAGE_SELF)
print(json.dumps({"wall": t1 - t0, "cpu": (r1.ru_utime + r1.ru_stime) - (r0.ru_utime + r0.ru_stime),
                  "minflt": r1.ru_minflt - r0.ru_minflt, "majflt": r1.ru_majflt - r0.ru_majflt, "n": n}))
'''.replace("import sys,", "import json, sys,")
path, hold, rounds = sys.argv[1], sys.argv[2], int(sys.argv[3])
res = {k: [] for k in TREES}
for r in range(rounds):
    for name in (TREES if r % 2 == 0 else list(TREES)[::-1]):
        env = dict(os.environ, PYTHONPATH=TREES[name], NEARDUP_JSONL_SCANNER="1")
        out = subprocess.run([PY, "-c", CHILD, path, hold], env=env, capture_output=True, text=True)
        if out.returncode:
            print(out.stderr[-2000:]); sys.exit(1)
        res[name].append(json.loads(out.stdout.strip().splitlines()[-1]))
import statistics as st
summary = {"command": " ".join(sys.argv), "loadavg_end": open("/proc/loadavg").read().strip()}
for k, v in res.items():
    summary[k] = {m: {"median": st.median(x[m] for x in v), "min": min(x[m] for x in v)} for m in ("wall", "cpu", "minflt", "majflt")}
    summary[k]["n"] = v[0]["n"]
summary["runs"] = res
print(json.dumps({k: summary[k] for k in summary if k != "runs"}, indent=1))
json.dump(summary, open(sys.argv[4], "w"), indent=1) if len(sys.argv) > 4 else None
