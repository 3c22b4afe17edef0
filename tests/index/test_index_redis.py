"""The index on a real redis-server (started here on a free loopback port): the same answers as
a folder index, concurrent writers, a restart, a crash mid-add, errors."""

import signal
import subprocess
import sys
import time

import pytest

from neardup.errors import ConfigError
from neardup.index import Index

from helpers import RedisServer, child_env as env, neardup_command as cli, run_in_process, write_jsonl
from index_corpus import make_split

try:
    import redis
except ImportError:  # not a skip: CI installs it with the test extra
    pytest.fail("the redis client is missing: pip install -e '.[test]'", pytrace=False)

pytestmark = pytest.mark.slow  # a redis-server, concurrent writers, restarts and kill -9


@pytest.fixture(scope="module")
def split():
    return make_split(600, seed=7)


@pytest.fixture
def url(redis_url):
    return redis_url


def test_redis_answers_like_a_folder_index(url, split, tmp_path):
    folder = Index(str(tmp_path / "f"))
    on_redis = Index(url)
    for k in range(0, len(split.a_texts), 150):  # several segments
        folder.add(split.a_texts[k:k + 150], ids=split.a_ids[k:k + 150], name="A")
        on_redis.add(split.a_texts[k:k + 150], ids=split.a_ids[k:k + 150], name="A")
    want = folder.query(split.b_texts)
    reader = Index(url, refresh=3600)  # holds its manifest and segments through a compaction
    assert reader.query(split.b_texts) == want
    assert sum(1 for r in want if r) > 50
    s, f = Index(url).stats(), folder.stats()
    assert (s["documents"], s["segments"], s["bytes"], s["sources"]) == (f["documents"], f["segments"], f["bytes"], f["sources"])
    Index(url).compact()
    assert Index(url).stats()["segments"] == 1
    assert Index(url).query(split.b_texts) == want
    assert reader.query(split.b_texts) == want  # its segments are gone: it reads the new manifest
    keys = redis.Redis.from_url(url).keys("neardup:seg:*")
    assert {k.decode().split(":")[2] for k in keys} == {Index(url).storage.read_manifest()["segments"][0]["name"]}
    with pytest.raises(ConfigError, match="ngram 5"):
        Index(url, ngram=4)


def test_two_processes_adding_at_once_lose_nothing(url, split, tmp_path):
    n = len(split.b_texts) // 4
    files = []
    for w in range(4):
        texts = split.b_texts[w * n:(w + 1) * n]
        files.append(write_jsonl(str(tmp_path / f"w{w}.jsonl"), texts, [f"w{w}-{i}" for i in range(len(texts))]))
    code = ("import sys, neardup.index.segments as s; s.MAX_SEGMENT_DOCS = 20; "
            "from neardup.cli import main; sys.exit(main(sys.argv[1:]))")
    procs = []
    for ids in ("id", ""):  # each writer commits twice, all at once (the second time with positions: an
        # id is one document's, so the second add of the file takes ids w{w}/w{w}.jsonl:LINE)
        procs = [subprocess.Popen([sys.executable, "-c", code, "index", "add", url, f, "--name", f"w{w}",
                                   "--id-column", ids, "--batch-size", "10"], env=env(),
                                  stderr=subprocess.PIPE) for w, f in enumerate(files)]
        for p in procs:
            assert p.wait(timeout=300) == 0, p.stderr.read().decode()
    idx = Index(url)
    s = idx.stats()
    assert s["documents"] == 2 * 4 * n
    assert s["sources"] == {f"w{w}": 2 * n for w in range(4)}
    res = idx.query(split.b_texts[:4 * n])
    for i, matches in enumerate(res):
        w, j = divmod(i, n)
        own = [m for m in matches if m.id in (f"w{w}-{j}", f"w{w}/w{w}.jsonl:{j + 1}")]
        assert len(own) == 2 and all(m.similarity == 1.0 and m.source == f"w{w}" for m in own)


def test_restart_with_persistence_keeps_the_index(tmp_path, split):
    server = RedisServer(tmp_path).start()
    try:
        url = server.url(0)
        Index(url).add(split.a_texts, ids=split.a_ids, name="A")
        want = Index(url).query(split.b_texts[:100])
        stats = Index(url).stats()
        server.kill()  # kill -9: the append-only file, fsynced at every write, is all that remains
        with pytest.raises(Exception, match="cannot reach Redis"):
            Index(url)
        server.start()
        assert Index(url).stats() == stats
        assert Index(url).query(split.b_texts[:100]) == want
    finally:
        server.stop()


def test_kill_9_before_the_commit_leaves_the_redis_index_as_before(url, split, tmp_path):
    Index(url).add(split.a_texts[:100], ids=split.a_ids[:100], name="A")
    manifest = redis.Redis.from_url(url).get("neardup:manifest")
    b = write_jsonl(str(tmp_path / "b.jsonl"), split.b_texts, split.b_ids)
    for point in ("segment_written", "before_manifest_switch"):
        p = subprocess.run(cli("index", "add", url, b, "--name", "B", "--id-column", "id", crash_at=point), env=env(),
                           capture_output=True)
        assert p.returncode == -signal.SIGKILL
        assert redis.Redis.from_url(url).get("neardup:manifest") == manifest
        assert Index(url).stats()["documents"] == 100
    p = run_in_process("index", "add", url, b, "--name", "B", "--id-column", "id")  # the rerun needs no process
    assert p.returncode == 0, p.stderr
    idx = Index(url)
    assert idx.stats()["sources"] == {"A": 100, "B": len(split.b_texts)}
    res = idx.query(split.b_texts)
    assert all(sum(1 for m in r if m.id == i and m.source == "B") == 1 for r, i in zip(res, split.b_ids))


def test_prefixes_keep_indexes_apart_in_one_database(url, split):
    Index(url + "?prefix=one:").add(split.a_texts[:20], name="one")
    Index(url + "?prefix=two:", ngram=3).add(split.a_texts[20:50], name="two")
    assert Index(url + "?prefix=one:").stats()["sources"] == {"one": 20}
    two = Index(url + "?prefix=two:")
    assert two.stats()["sources"] == {"two": 30} and two.params["ngram"] == 3
    assert Index(url + "?prefix=one:").query(split.a_texts[20:21]) == [[]]
    with pytest.raises(Exception, match="no index at"):
        Index(url, must_exist=True)  # the default prefix holds nothing here


# ----------------------------------------------------------------------------- refusals (issue 17)

def test_rediss_to_a_plain_server_fails_within_seconds(redis_server, capsys):
    """TLS to a server that does not speak it: the handshake gets no answer; the connect timeout
    (3 s, not retried: the first PING's client retries only a refused or dropped connection) ends
    it, not the 60 s of a command's timeout."""
    from neardup.cli import main
    from neardup.errors import StorageError
    url = f"rediss://127.0.0.1:{redis_server.port}/0"
    t0 = time.time()
    with pytest.raises(StorageError, match="cannot reach Redis"):
        Index(url)
    assert time.time() - t0 < 15
    t0 = time.time()
    assert main(["index", "stats", url]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("neardup: error: cannot reach Redis at rediss://127.0.0.1:"), err
    assert time.time() - t0 < 15


def test_a_server_that_stops_answering_is_told_after_the_commands_timeout_not_retried(tmp_path, split, monkeypatch):
    """A server frozen after the index was opened (SIGSTOP: the connection stays, no answer
    comes): a query fails in one line after about one command timeout, each timeout not retried
    (it took 4 of them, 240 s at the default 60 s)."""
    from helpers import RedisServer
    from neardup.errors import StorageError
    from neardup.index import redis_storage
    monkeypatch.setattr(redis_storage, "COMMAND_TIMEOUT_S", 2)
    (tmp_path / "redis").mkdir()
    server = RedisServer(tmp_path / "redis").start()
    try:
        idx = Index(server.url(0))
        idx.add(split.a_texts[:20], name="a")
        server.proc.send_signal(signal.SIGSTOP)
        t0 = time.time()
        with pytest.raises(StorageError, match="cannot reach Redis"):
            idx.query(split.a_texts[:5])
        assert time.time() - t0 < 2 * 2 + 1.5  # two commands' timeouts at most; before: 4 (8 s)
    finally:
        server.proc.send_signal(signal.SIGCONT)
        server.stop()


def test_a_password_is_never_printed_or_stored(redis_server, split, tmp_path, capsys):
    from neardup.cli import main
    admin = redis.Redis(port=redis_server.port)
    admin.execute_command("ACL", "SETUSER", "neardup-user", "on", ">s3cret", "~*", "+@all")
    url = f"redis://neardup-user:s3cret@127.0.0.1:{redis_server.port}/14"
    try:
        redis.Redis.from_url(url).flushdb()
        a = write_jsonl(str(tmp_path / "a.jsonl"), split.a_texts[:20], split.a_ids[:20])
        assert main(["index", "add", url, a]) == 0
        assert main(["index", "stats", url]) == 0
        assert main(["index", "verify", url]) == 0
        assert main(["index", "query", url, a]) == 0
        out, err = capsys.readouterr()
        assert "s3cret" not in out + err and "neardup-user:***@" in out + err
        assert Index(url).stats()["location"] == f"redis://neardup-user:***@127.0.0.1:{redis_server.port}/14"
        assert "s3cret" not in repr(Index(url))
        assert b"s3cret" not in redis.Redis.from_url(url).get("neardup:manifest")
        wrong = url.replace("s3cret", "wr0ng")
        assert main(["index", "stats", wrong]) == 2
        err = capsys.readouterr().err
        assert "wr0ng" not in err and len(err.strip().splitlines()) == 1, err
        assert "refused the credentials" in err and "cannot reach" not in err, err  # it was reached
    finally:
        admin.execute_command("ACL", "DELUSER", "neardup-user")
        admin.close()


def test_a_damaged_segment_on_redis_is_refused(url, split, capsys):
    from neardup.cli import main
    from neardup.errors import StorageError
    idx = Index(url)
    idx.add(split.a_texts[:100], ids=split.a_ids[:100], name="A")
    idx.add(split.a_texts[100:], ids=split.a_ids[100:], name="A2")
    first = idx.storage.read_manifest()["segments"][0]["name"]
    client = redis.Redis.from_url(url)
    assert main(["index", "verify", url]) == 0
    capsys.readouterr()
    for file in ("keys.u64", "fp.u32"):
        key = f"neardup:seg:{first}:{file}"
        good = client.get(key)
        client.setrange(key, len(good) // 2, bytes(b ^ 0xFF for b in good[len(good) // 2:len(good) // 2 + 8]))
        assert main(["index", "verify", url]) == 2
        out = capsys.readouterr().out
        assert first in out and file in out, out
        if file == "keys.u64":  # fetched whole by every reader: checked there
            with pytest.raises(StorageError, match=f"segment {first} file keys.u64"):
                Index(url).query(split.a_texts[:5])
        manifest = client.get("neardup:manifest")
        with pytest.raises(StorageError, match=f"segment {first} file {file}"):
            Index(url).compact()
        assert client.get("neardup:manifest") == manifest
        client.set(key, good)
    client.delete(f"neardup:seg:{first}:src.u32")
    with pytest.raises(StorageError, match="src.u32"):
        Index(url).add(split.b_texts[:3], name="B")
    client.close()
