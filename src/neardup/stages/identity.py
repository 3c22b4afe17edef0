"""A run's identity: what makes two runs the same run (the options that change the result, and each
input's name, size and modification time), its fingerprint, and what differs between two.
state.json keeps it, so that a refused ``--resume`` can say what differs; the output folder's
marker keeps the fingerprint.
"""

from __future__ import annotations

import functools
import hashlib
import json
from typing import Any, List, Optional

from ..io.storage import fs


def run_identity(config, sources) -> dict:
    """A run's identity: the options that change its result (:meth:`Config.identity`: not those
    of the Execution group, so that a run may be resumed with other workers, engine or batch
    size), and each input's name, size and modification time. Kept in state.json, so that a
    refused ``--resume`` can say what differs."""
    relevant = config.identity()
    relevant["against"] = [fs.redact(a) for a in relevant.get("against") or ()]  # state.json stores no password
    plain = _plain_inputs(sources)
    if plain is not None:
        return {"config": relevant, "inputs": plain}
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
    return {"config": relevant, "inputs": Inputs(files)}


def _plain_inputs(sources) -> Optional["Inputs"]:
    """:func:`run_identity`'s inputs with their JSON as discover made it in its stat thread
    (``sources.inputs_json``: a folder's files, each named by its path, no path that JSON escapes
    or that holds ``://``, nothing for :func:`fs.redact` to hide): where the sources are those
    files in that order, each named by its path. None otherwise (the rows one by one)."""
    made = getattr(sources, "inputs_json", None)
    if made is None:
        return None
    paths, text, sizes, mtimes = made
    if len(sources) != len(paths):
        return None
    try:
        mine = [s.path for s in sources]
        if mine != paths or [s.name for s in sources] != paths:
            return None
    except AttributeError:
        return None
    out = Inputs(map(list, zip(paths, paths, sizes, mtimes)))
    out.__dict__["json"] = text  # json.dumps(out, sort_keys=True), as Inputs.json makes it
    out.sizes = sizes
    return out


class Inputs(list):
    """The inputs of a run's identity, ``[name, path, size, mtime]`` each, their JSON made once
    (:func:`encoded`) for the fingerprint and the work dir's inputs.json (100,000 files: 0.08
    CPU-s each time). Made whole by :func:`run_identity`, never changed after. ``sizes``: each
    row's size, where :func:`_plain_inputs` has them as a list (the work dir's read plan takes
    them, not a loop over the rows)."""

    sizes: Optional[List[int]] = None

    @functools.cached_property
    def json(self) -> str:
        return json.dumps(self, sort_keys=True)


def encoded(value: Any) -> str:
    """``json.dumps(value, sort_keys=True)``; the JSON of :class:`Inputs` made once."""
    return value.json if isinstance(value, Inputs) else json.dumps(value, sort_keys=True)


def fingerprint(identity) -> str:
    """The hash of a run's identity (:func:`run_identity`; a string is taken as a fingerprint):
    of ``json.dumps(identity, sort_keys=True)``, written a key at a time (:func:`encoded`)."""
    if isinstance(identity, str):
        return identity
    text = "{" + ", ".join(f"{json.dumps(k)}: {encoded(identity[k])}" for k in sorted(identity)) + "}"
    return hashlib.sha256(text.encode()).hexdigest()


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
