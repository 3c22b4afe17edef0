"""The index's edges (issue 29): two first adds of different kinds at once, a Bloom index's
extra false-positive rate where it is used or grown, absurd rates, an index that is its own
input, a manifest written by another program, a Redis URL of another service."""

import multiprocessing
import socket
import threading
import time
import pytest

from neardup.errors import ConfigError, NeardupError
from neardup.index import Index

from helpers import run_in_process, write_jsonl

TEXTS_A = [f"alpha beta gamma delta {i} epsilon zeta eta theta iota kappa {i * 7}" for i in range(40)]
TEXTS_B = [f"lorem ipsum dolor sit amet {i} consectetur adipiscing elit sed do {i * 3}" for i in range(40)]
KINDS = [({}, {"kind": "bloom"}), ({"verify": "exact"}, {"verify": "estimate"})]


def _first_adds(tries, barrier, results):
    """A child: for each (location, options, texts) opens the (new) index, waits for the other
    child, adds; reports what happened. One child does every try: a spawn costs seconds."""
    for location, options, texts in tries:
        try:
            index = Index(location, workers=1, **options)
            barrier.wait(60)
            index.add(texts, name="x")
            results.put((location, "ok", ""))
        except NeardupError as exc:
            results.put((location, "refused", str(exc)))
        except BaseException as exc:  # noqa: BLE001 - a traceback is what the test is about
            results.put((location, "crash", repr(exc)))


def _concurrent_first_adds(make_location, tries):
    """``tries`` races of two first adds of different kinds (bloom and exact, exact and estimate),
    each on a new index; every index must end with one of them committed and sound."""
    plans = ([], [])
    for t in range(tries):
        first, second = KINDS[t % len(KINDS)]
        if t % 4 >= 2:
            first, second = second, first
        plans[0].append((make_location(t), first, TEXTS_A))
        plans[1].append((make_location(t), second, TEXTS_B))
    ctx = multiprocessing.get_context("spawn")  # fork: unsafe in a process that has run OpenMP
    barrier, results = ctx.Barrier(2), ctx.Queue()
    procs = [ctx.Process(target=_first_adds, args=(plan, barrier, results)) for plan in plans]
    for p in procs:
        p.start()
    got = {}
    for _ in range(2 * tries):
        location, outcome, message = results.get(timeout=300)
        got.setdefault(location, []).append((outcome, message))
    for p in procs:
        p.join(60)
    for location, outcomes in got.items():
        outcomes.sort()
        assert [o for o, _ in outcomes] == ["ok", "refused"], (location, outcomes)
        assert "\n" not in outcomes[1][1] and "another process" in outcomes[1][1], outcomes
        _check_usable(location)


def _check_usable(location):
    index = Index(location, must_exist=True)
    r = index.verify()
    assert r["problems"] == [] and r["documents"] == 40, r
    stats = index.stats()
    assert stats["documents"] == 40
    index.query(TEXTS_A[:3])
    if index.store != "bloom":
        index.compact()
    index.close()


@pytest.mark.slow
def test_concurrent_first_adds_of_different_kinds_leave_one_usable_folder_index(tmp_path):
    # before: both committed, and every later stats, query and compact failed with KeyError 'bloom'
    _concurrent_first_adds(lambda t: str(tmp_path / f"ix{t}"), 20)


@pytest.mark.slow
def test_concurrent_first_adds_of_different_kinds_leave_one_usable_redis_index(redis_url):
    base = redis_url
    _concurrent_first_adds(lambda t: f"{base}?prefix=race{t}:", 20)


def test_a_writer_refuses_an_index_made_meanwhile_with_another_kind(tmp_path):
    # the race made deterministic: both opened before either adds
    location = str(tmp_path / "ix")
    exact = Index(location)
    bloom = Index(location, kind="bloom")
    bloom.add(TEXTS_B, name="b")
    with pytest.raises(ConfigError, match="is a bloom index .*another process"):
        exact.add(TEXTS_A, name="a")
    estimate = Index(str(tmp_path / "iy"), verify="estimate")
    Index(str(tmp_path / "iy"), verify="exact").add(TEXTS_A, name="a")
    with pytest.raises(ConfigError, match="is an exact index .*not an exact index keeping signatures"):
        estimate.add(TEXTS_B, name="b")
    rate = Index(str(tmp_path / "iz"), kind="bloom", false_positive_rate=1e-6)
    Index(str(tmp_path / "iz"), kind="bloom", false_positive_rate=1e-7).add(TEXTS_A, name="a")
    with pytest.raises(ConfigError, match="false_positive_rate 1e-07 .*this one with 1e-06"):
        rate.add(TEXTS_B, name="b")
    for name in ("ix", "iy", "iz"):
        _check_usable(str(tmp_path / name))


def _one_line_failure(*args):
    code, out, err = run_in_process(*args)
    lines = [line for line in err.splitlines() if line.strip()]
    assert code == 2 and len(lines) == 1 and "Traceback" not in err, (code, out, err)
    return lines[0]


def test_an_index_is_refused_as_its_own_input(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    write_jsonl(data / "a.jsonl", TEXTS_A)
    index = data / "kept.ndx"
    assert run_in_process("index", "add", index, data / "a.jsonl").returncode == 0
    before = Index(str(index)).stats()
    # before: the folder holding the index was read whole, the index's manifest.json with it
    for inputs in ([data], [index], [index / "manifest.json"], [str(data) + "/*"]):
        line = _one_line_failure("index", "add", index, *inputs)
        assert "is, holds or lies inside the input" in line, line
    with pytest.raises(ConfigError, match="lies inside the input"):
        Index(str(index)).add(str(data))
    after = Index(str(index)).stats()
    assert (after["documents"], after["generation"]) == (before["documents"], before["generation"])


def test_index_query_does_not_write_into_the_index_folder(tmp_path):
    write_jsonl(tmp_path / "a.jsonl", TEXTS_A)
    index = tmp_path / "ix"
    assert run_in_process("index", "add", index, tmp_path / "a.jsonl").returncode == 0
    names = sorted(p.name for p in index.iterdir())
    line = _one_line_failure("index", "query", index, tmp_path / "a.jsonl", "-o", index / "answers.jsonl")
    assert "lies inside the index" in line, line
    assert sorted(p.name for p in index.iterdir()) == names
    assert Index(str(index)).verify()["problems"] == []


def test_another_programs_manifest_is_not_called_a_corrupt_index(tmp_path):
    folder = tmp_path / "webapp"
    folder.mkdir()
    (folder / "manifest.json").write_text('{"name": "My App", "icons": [], "start_url": "/"}')
    write_jsonl(tmp_path / "a.jsonl", TEXTS_A)
    for args in (("index", "stats", folder), ("index", "add", folder, tmp_path / "a.jsonl"),
                 ("index", "query", folder, tmp_path / "a.jsonl")):
        line = _one_line_failure(*args)
        # before: "corrupt index ...: the manifest is not readable (KeyError)"
        assert "is not a neardup index" in line and "corrupt" not in line, line
    assert (folder / "manifest.json").read_text().startswith('{"name": "My App"')
    # a manifest of ours that is damaged is still called corrupt
    (folder / "manifest.json").write_text('{"sha256": "0", "manifest": {"format": "neardup-index"')
    assert "corrupt index" in _one_line_failure("index", "stats", folder)


class _Service:
    """A TCP service on a free loopback port that is not Redis: ``greeting`` sent on connect,
    ``reply`` to whatever the client sends (None: silent)."""

    def __init__(self, greeting=b"", reply=None):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.port = self.sock.getsockname()[1]
        self.greeting, self.reply = greeting, reply
        self.accepted = 0
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self):
        conns = []
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            conns.append(conn)  # kept open: a silent service does not hang up
            self.accepted += 1
            if self.greeting:
                conn.sendall(self.greeting)
            if self.reply is not None:
                conn.settimeout(10)
                try:
                    conn.recv(4096)
                    conn.sendall(self.reply)
                except OSError:
                    pass

    def close(self):
        self.sock.close()


@pytest.mark.parametrize("greeting, reply, says", [
    (b"SSH-2.0-OpenSSH_9.6p1 Ubuntu-3ubuntu13\r\n", None, "it sent"),
    (b"", b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n", "it sent"),
    pytest.param(b"", None, "no answer to PING within 5 s", marks=pytest.mark.slow),  # waits out the timeout: 10 s
], ids=["ssh", "http", "silent"])
def test_a_redis_url_of_another_service_is_refused_in_one_line(tmp_path, greeting, reply, says):
    service = _Service(greeting, reply)
    write_jsonl(tmp_path / "a.jsonl", TEXTS_A)
    try:
        t0 = time.monotonic()
        for n, args in enumerate((("index", "stats", f"redis://127.0.0.1:{service.port}/0"),
                                  ("index", "add", f"redis://127.0.0.1:{service.port}/0", tmp_path / "a.jsonl"))):
            # before: a traceback and "this is a bug" (a protocol error), or a minute of waiting
            line = _one_line_failure(*args)
            assert "does not answer as a Redis server does" in line and says in line, line
            if reply is None and not greeting:  # the wait said is the wait: one PING, not retried after its timeout
                assert service.accepted == n + 1, service.accepted
        assert time.monotonic() - t0 < 30
    finally:
        service.close()


# --------------------------------------------------------------------------- a Bloom index's extra false-positive rate

def _random_keys(n, bands, seed):
    import numpy as np
    return np.random.default_rng(seed).integers(0, 2 ** 63, size=(n, bands), dtype=np.uint64) * np.uint64(2) + \
        np.uint64(1)


def _bloom_segments(index, segments, docs=5000):
    import numpy as np
    sig = np.zeros((docs, index.config.num_perm), np.uint32)
    for seg in range(segments):
        index.add_arrays(_random_keys(docs, index.config.bands, seed=seg), [f"d{i}" for i in range(docs)],
                         f"s{seg}", signatures=sig)


def test_absurd_false_positive_rates_are_refused_in_one_line(tmp_path):
    import time as clock
    write_jsonl(tmp_path / "a.jsonl", TEXTS_A)
    t0 = clock.monotonic()
    # before: accepted; 2,000 documents took 72 s and 9.5 GB
    line = _one_line_failure("index", "add", tmp_path / "tiny", tmp_path / "a.jsonl", "--kind", "bloom",
                             "--false-positive-rate", "1e-300")
    assert "bytes of filters a document" in line and "give at least" in line, line
    # before: accepted, and a one-segment index answered yes for 49% of unrelated documents
    line = _one_line_failure("index", "add", tmp_path / "loose", tmp_path / "a.jsonl", "--kind", "bloom",
                             "--false-positive-rate", "0.05")
    assert "extra false-positive rate of 0.603" in line and "give at most" in line, line  # 18 filters (0.487 at 13)
    assert clock.monotonic() - t0 < 30
    assert not (tmp_path / "tiny").exists() and not (tmp_path / "loose").exists()
    low, high = __import__("neardup.index.bloom", fromlist=["x"]).rate_bounds(18)  # the default bands at 0.8
    Index(str(tmp_path / "edge"), kind="bloom", false_positive_rate=high * 0.999)
    Index(str(tmp_path / "edge"), kind="bloom", false_positive_rate=low * 1.001)


def test_an_add_that_would_take_a_bloom_index_past_the_bound_commits_nothing(tmp_path):
    index = Index(str(tmp_path / "b"), kind="bloom", false_positive_rate=1e-3, bands=13, rows=7)
    _bloom_segments(index, 3)  # 3 x 13 filters at 1e-3: F ~ 3.9%
    before = index.stats()
    assert 0.03 < before["extra_false_positive_rate"] < 0.05
    with pytest.raises(ConfigError, match="this add would leave it with an extra false-positive rate of 0.05"):
        _bloom_segments(index, 1)
    after = index.stats()
    assert (after["segments"], after["generation"]) == (before["segments"], before["generation"])
    assert index.verify()["problems"] == []


def test_index_query_warns_of_a_bloom_index_with_a_high_extra_rate(tmp_path):
    write_jsonl(tmp_path / "a.jsonl", TEXTS_A)
    index = Index(str(tmp_path / "b"), kind="bloom", false_positive_rate=1e-3, bands=13, rows=7)  # 13 filters
    _bloom_segments(index, 1)
    code, out, err = run_in_process("index", "query", tmp_path / "b", tmp_path / "a.jsonl")
    assert code == 0 and "neardup: warning: bloom index" in err and "extra false-positive rate of 1.27e-02" in err, err


def test_an_index_mixed_by_an_older_race_is_one_line_not_a_keyerror(tmp_path):
    import json
    import shutil
    from neardup.index.storage import manifest_bytes
    exact, bloom = tmp_path / "exact", tmp_path / "bloom"
    Index(str(exact)).add(TEXTS_A, name="a")
    Index(str(bloom), kind="bloom").add(TEXTS_B, name="b")
    for mixed, into, other in ((tmp_path / "m1", exact, bloom), (tmp_path / "m2", bloom, exact)):
        shutil.copytree(into, mixed)
        body = json.loads((mixed / "manifest.json").read_text())["manifest"]
        for seg in json.loads((other / "manifest.json").read_text())["manifest"]["segments"]:
            shutil.copytree(other / "segments" / seg["name"], mixed / "segments" / seg["name"])
            body["segments"].append(seg)  # what the race committed before: both adds
        (mixed / "manifest.json").write_bytes(manifest_bytes(body))
        # before: KeyError 'bloom' (a traceback) from stats, query and compact
        for command in ("stats", "verify", "compact"):
            line = _one_line_failure("index", command, mixed)
            assert "segment in a" in line and "build the index again" in line, line
        write_jsonl(tmp_path / "a.jsonl", TEXTS_A)
        line = _one_line_failure("index", "query", mixed, tmp_path / "a.jsonl")
        assert "segment in a" in line, line


@pytest.mark.parametrize("kind,version,says", [
    ("bloom", 3, "rebuild it"),  # its filters' probes were not mixed: small segments answered above their rate
    ("exact", 2, "rebuild it"),
    ("bloom", 5, "made by a newer neardup"),  # not "rebuild": the index is fine, this neardup is old
    ("exact", 4, "made by a newer neardup"),
])
def test_an_index_of_another_format_version_is_one_line_that_says_what_to_do(tmp_path, kind, version, says):
    import json
    from neardup.index.storage import manifest_bytes
    folder = tmp_path / kind
    Index(str(folder), kind=kind).add(TEXTS_A, name="a")
    body = json.loads((folder / "manifest.json").read_text())["manifest"]
    assert body["version"] == (4 if kind == "bloom" else 3)  # what this neardup writes
    body["version"] = version
    (folder / "manifest.json").write_bytes(manifest_bytes(body))
    for command in ("stats", "query"):
        write_jsonl(tmp_path / "a.jsonl", TEXTS_A)
        line = _one_line_failure("index", command, folder, *((tmp_path / "a.jsonl",) if command == "query" else ()))
        assert f"format version {version}" in line and says in line, line
