"""The pair stage alone, trees alternating: each tree's finished 1M work dir (made once, kept) resumed with
pairs, clusters and write undone; stats.json's pairs and write seconds and the process CPU.

    .venv/bin/python bench/pairs_resume.py 3 base=/work/wt-base38/src main=/work/main/src

The work dirs and outputs are /tmp/pab_w_NAME and /tmp/pab_o_NAME: a tree NAME another session
uses names the same folders (kept between sessions), so give names of your own, or PAB_DIR=/tmp/mine
to put them elsewhere.
"""
import json, os, resource, shutil, subprocess, sys, time
trees = dict(a.split("=") for a in sys.argv[2:])
rounds = int(sys.argv[1])
root = os.environ.get("PAB_DIR", "/tmp")
for name, src in trees.items():
    w = f"{root}/pab_w_{name}"
    if not os.path.exists(w + "/state.json"):
        subprocess.run([".venv/bin/python", "-m", "neardup", "dedup", "bench/data/synth_1000000_s0.jsonl", "-o", f"{root}/pab_o_{name}",
                        "--work-dir", w, "-q", "--overwrite"], env=dict(os.environ, PYTHONPATH=src), check=True)
        shutil.copy(w + "/state.json", w + "/state.full.json")
for r in range(rounds):
    for name, src in trees.items():
        w = f"{root}/pab_w_{name}"
        s = json.load(open(w + "/state.full.json"))
        for k in ("pairs", "clusters", "write"): s["done"].pop(k, None)
        json.dump(s, open(w + "/state.json", "w"))
        b = resource.getrusage(resource.RUSAGE_CHILDREN)
        subprocess.run([".venv/bin/python", "-m", "neardup", "dedup", "bench/data/synth_1000000_s0.jsonl", "-o", f"{root}/pab_o_{name}",
                        "--work-dir", w, "-q", "--overwrite", "--resume"], env=dict(os.environ, PYTHONPATH=src), check=True)
        a = resource.getrusage(resource.RUSAGE_CHILDREN)
        sec = json.load(open(f"{root}/pab_o_{name}/stats.json"))["seconds"]
        print(name, "pairs", sec["pairs"], "write", sec["write"], "cpu", round(a.ru_utime - b.ru_utime + a.ru_stime - b.ru_stime, 2), os.getloadavg()[0], flush=True)
