"""Stands in for one of the raylet's Python agents in the local Ray instance of a run
(:func:`neardup.engines.ray_cluster.start_local`); run as a script by its path, with the standard
library only (no import of Ray, nor of neardup).

The raylet starts two agents and registers its node (so that ``ray.init`` can connect) only once
each has written the ports it serves into the session folder: the dashboard agent (metrics, logs
and jobs for the dashboard, none of which a run of neardup asks for; in a Ray without the
dashboard's packages it serves nothing at all) and the runtime-env agent (which sets up a task's
runtime environment: needed only by a run that has one). Each imports Ray and its dependencies
first: 1.1-1.6 s before the node is up, and 1-1.5 CPU-s, on 2 busy CPUs. This script writes
what the raylet waits for at once: the agent's ports as -1 ("not served", which is what the
dashboard agent itself writes for a service it does not run), then waits for the raylet (its
parent) to end, as the agents do, checking once a second.

    python ray_agent.py --session-dir=DIR --node-id=HEX --ports=NAME[,NAME...]
"""

import os
import sys
import time


def persist(session_dir: str, node_id: str, name: str, port: int) -> None:
    """As Ray's ``persist_port``: the file ``NAME_NODEID`` of the session folder holds the port,
    written under another name and renamed (the raylet never reads half of it)."""
    path = os.path.join(session_dir, f"{name}_{node_id}")
    tmp = f"{path}.{os.getpid()}.tmp"
    with open(tmp, "w") as f:
        f.write(str(port))
    os.replace(tmp, path)


def main(argv) -> int:
    args = dict(a[2:].split("=", 1) for a in argv if a.startswith("--") and "=" in a)
    parent = os.getppid()
    for name in filter(None, args.get("ports", "").split(",")):
        persist(args["session-dir"], args["node-id"], name, -1)
    while os.getppid() == parent:  # the raylet's end (or its SIGTERM to this process) ends it
        time.sleep(1.0)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
