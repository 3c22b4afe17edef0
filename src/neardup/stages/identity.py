"""A run's identity: what makes two runs the same run (the options that change the result, and each
input's name, size and modification time), its fingerprint, and what differs between two.
state.json keeps it, so that a refused ``--resume`` can say what differs; the output folder's
marker keeps the fingerprint.
"""

from __future__ import annotations

import hashlib
import json
from typing import List, Optional

from ..io.storage import fs


def run_identity(config, sources) -> dict:
    """A run's identity: the options that change its result (:meth:`Config.identity`: not those
    of the Execution group, so that a run may be resumed with other workers, engine or batch
    size), and each input's name, size and modification time. Kept in state.json, so that a
    refused ``--resume`` can say what differs."""
    relevant = config.identity()
    relevant["against"] = [fs.redact(a) for a in relevant.get("against") or ()]  # state.json stores no password
    files = []
    known = getattr(sources, "file_stats", None) or {}  # discover's stat of each local file
    infos = fs.infos([s.path for s in sources if s.format != "table" and s.path not in known])
    for s in sources:
        if s.format == "table":
            files.append([s.name, "table", int(s.table.num_rows)])
            continue
        st = known.get(s.path)
        if st is None:
            st = infos.get(s.path) or fs.info(s.path)
            st = (st.size, st.mtime_ns)
        files.append([fs.redact(s.name), fs.redact(s.path), st[0], st[1]])
    return {"config": relevant, "inputs": files}


def fingerprint(identity) -> str:
    """The hash of a run's identity (:func:`run_identity`; a string is taken as a fingerprint)."""
    if isinstance(identity, str):
        return identity
    return hashlib.sha256(json.dumps(identity, sort_keys=True).encode()).hexdigest()


def differences(old: Optional[dict], new: dict) -> List[str]:
    """What differs between two run identities, in words: ``inputs`` and the option names."""
    if not isinstance(old, dict) or not isinstance(new, dict):
        return ["the run (an older neardup wrote it)"]
    new = json.loads(json.dumps(new))  # as stored: tuples are lists there
    out = []
    if old.get("inputs") != new.get("inputs"):
        out.append("inputs")
    a, b = old.get("config") or {}, new.get("config") or {}
    out.extend(sorted(k for k in set(a) | set(b) if a.get(k) != b.get(k) and not _internal(k)))
    return out or ["nothing recorded"]


def _internal(name: str) -> bool:
    """Whether ``name`` is an option no user gives (neither a flag nor recorded: neardup's note
    of how another option was chosen, as ``id_column_auto``); a message names the option it
    follows instead, which differs too."""
    import dataclasses

    from ..config.options import GROUPS, OWNER, declaration

    group = OWNER.get(name)
    if group is None:
        return False
    how = next(declaration(f) for f in dataclasses.fields(GROUPS[group]) if f.name == name)
    return not how.cli and not how.recorded
