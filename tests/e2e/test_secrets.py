"""A secret in a URL reaches no output, work dir, index, message or report (issue 29), whatever
its shape: generated passwords and user names (tests/generated_secrets.py: ``@ / : % ? #``,
unicode) in S3, HTTP and Redis URLs, given to every command that takes a URL, on the real
servers of the suite (moto on loopback, redis-server; HTTP: a port nothing listens on). Each
command runs in this process (run_in_process); after them, every file under the test's folder
(stats.json, report.html, the Parquet files read as tables, state.json, an index's manifest and
sources), every key and value of the Redis database, and all that was printed are searched for
every word of every secret."""

from __future__ import annotations

import json
import random
from pathlib import Path
from urllib.parse import quote

import pytest

from generated_secrets import generated_secret, leaked
from helpers import free_port, run_in_process


def _texts_of_files(root: Path):
    """(path, text) of every file under ``root``: Parquet files as their tables' text (their
    strings may be compressed in the bytes), the others as UTF-8."""
    import pyarrow.parquet as pq

    for p in sorted(root.rglob("*")):
        if not p.is_file():
            continue
        if p.suffix == ".parquet":
            try:
                yield p, json.dumps(pq.read_table(p).to_pylist(), default=str, ensure_ascii=False)
                continue
            except Exception:  # noqa: BLE001 - not a whole table (a part file): its bytes then
                pass
        yield p, p.read_bytes().decode("utf-8", "replace")


def _texts_of_redis(url: str):
    import redis

    client = redis.Redis.from_url(url)
    for key in client.scan_iter():
        yield key.decode("utf-8", "replace"), (client.get(key) or b"").decode("utf-8", "replace")


def assert_hidden(secrets, ran, *, root: Path, redis_url=None):
    """No word of ``secrets`` in what the commands printed, in any file under ``root`` or in the
    Redis database at ``redis_url``."""
    places = [(f"{' '.join(map(str, args))} -> {r.returncode}", r.stdout + r.stderr) for args, r in ran]
    places += [(str(p), t) for p, t in _texts_of_files(root)]
    if redis_url:
        places += [(f"redis key {k}", k + " " + v) for k, v in _texts_of_redis(redis_url)]
    found = [(where, text[max(0, text.find(w) - 120):text.find(w) + 60]) for where, text in places
             for secret in secrets for w in leaked(secret, text)]
    assert not found, found[:3]


def run_all(commands):
    ran = []
    for args in commands:
        r = run_in_process(*args)
        ran.append((args, r))
        assert "Traceback" not in r.stderr, (args, r.stderr)
    return ran


@pytest.fixture
def dumps(tmp_path):
    """a.jsonl and b.jsonl: 150 documents each, b holding copies of a's (small: the commands'
    time is not the point)."""
    from neardup.testing.synth import generate_corpus

    texts = generate_corpus(300, seed=29, doc_words=40, jaccard_range=(0.9, 1.0)).texts
    (tmp_path / "a.jsonl").write_text("".join(json.dumps({"text": t}) + "\n" for t in texts[:150]))
    (tmp_path / "b.jsonl").write_text("".join(json.dumps({"text": t}) + "\n" for t in texts[150:]))
    return tmp_path


def redis_user(redis_url: str, rng: random.Random):
    """A user of the test's redis-server with a generated name and password: (the URL that logs
    in as it, its name, its password). The URL percent-encodes what a client's parser needs
    (``/ ? # %``) and leaves ``@``, ``:`` (of the password) and unicode raw."""
    import redis

    name = "u" + generated_secret(rng, "@")
    password = generated_secret(rng)
    redis.Redis.from_url(redis_url).acl_setuser(name, enabled=True, passwords=["+" + password], keys=["*"],
                                                commands=["+@all"], reset=True)
    keep = "@" + "".join(c for c in name + password if ord(c) > 127)
    netloc = f"{quote(name, safe=keep)}:{quote(password, safe=keep + ':')}"
    host = redis_url.partition("://")[2]
    return f"redis://{netloc}@{host}", name, password


@pytest.mark.parametrize("seed", [1])
@pytest.mark.slow
def test_a_redis_password_of_any_shape_reaches_nothing(tmp_path, dumps, redis_url, seed):
    """Every command that takes an index URL, and dedup --against/--update-index, report, on an
    index in Redis whose user and password are generated, and a source named by a URL holding
    the password (in a folder index and in Redis): all succeed, and no word of the password is
    printed or stored (removed.parquet's representative_source, the manifests included). Guards: state.json keeps --against redacted (mutation: drop the
    ``relevant["against"] = [fs.redact(a) ...]`` of stages/identity.py: the password is in
    state.json), and every other place a location is printed or stored (stats.json,
    report.html, index stats) through redact."""
    rng = random.Random(seed)
    url, name, password = redis_user(redis_url, rng)
    a, b = dumps / "a.jsonl", dumps / "b.jsonl"
    source = f"https://user:{password}@example.com/dump.jsonl"  # a source named by a URL, raw
    folder_index = tmp_path / "ix"
    ran = run_all([
        ("index", "add", folder_index, a, "--name", source),
        ("index", "stats", folder_index),
        ("dedup", b, "-o", tmp_path / "out2", "--against", folder_index),  # its representative_source
        ("index", "add", url, a, "--name", "first"),
        ("index", "add", url, a, "--name", source),
        ("index", "query", url, b, "-o", tmp_path / "matches.parquet"),
        ("index", "stats", url),
        ("index", "verify", url),
        ("dedup", b, "-o", tmp_path / "out", "--work-dir", tmp_path / "work", "--against", url, "--update-index"),
        ("report", tmp_path / "out", "-o", tmp_path / "report.html"),
        ("index", "remove", url, "--source", "first"),
        ("index", "compact", url),
        ("index", "stats", url),
    ])
    assert [r.returncode for _, r in ran] == [0] * len(ran), [(args, r.stderr) for args, r in ran]
    assert (tmp_path / "work" / "state.json").exists() and (tmp_path / "out" / "stats.json").exists()
    import pyarrow.parquet as pq
    assert "https://user:***@example.com/dump.jsonl" in (tmp_path / "ix" / "manifest.json").read_text()
    assert "https://user:***@example.com/dump.jsonl" in pq.read_table(tmp_path / "out2" / "removed.parquet").column(
        "representative_source").to_pylist()
    shown = "".join(r.stdout for _, r in ran)
    assert "redis://u" in shown and ":***@127.0.0.1" in shown  # the index is named, its password hidden
    assert_hidden([password], ran, root=tmp_path, redis_url=redis_url)  # the user is shown (user:***@)


@pytest.mark.slow
def test_a_one_letter_password_is_hidden_and_nothing_else(tmp_path, dumps, redis_url):
    """A password of one letter: its URL's span is hidden, and no other ``s`` of any text (the
    old redact replaced the secret everywhere: ``redi***://``, ``***tats.json``). Guard:
    MIN_SEARCHED (mutation: ``len(f) >= MIN_SEARCHED`` -> ``len(f) >= 1``)."""
    import redis

    redis.Redis.from_url(redis_url).acl_setuser("me", enabled=True, passwords=["+s"], keys=["*"],
                                                commands=["+@all"], reset=True)
    url = "redis://me:s@" + redis_url.partition("://")[2]
    ran = run_all([
        ("index", "add", url, dumps / "a.jsonl"),
        ("index", "stats", url),
        ("dedup", dumps / "b.jsonl", "-o", tmp_path / "out", "--work-dir", tmp_path / "work", "--against", url),
        ("report", tmp_path / "out", "-o", tmp_path / "report.html"),
    ])
    assert [r.returncode for _, r in ran] == [0] * len(ran), [(args, r.stderr) for args, r in ran]
    texts = [r.stdout + r.stderr for _, r in ran] + [t for _, t in _texts_of_files(tmp_path)]
    for text in texts:
        assert "me:s@" not in text
        assert text.count("***") == text.count("me:***@"), text  # nothing else hidden
    assert "me:***@" in ran[1][1].stdout and "me:***@" in (tmp_path / "out" / "stats.json").read_text()


def failing_urls(rng: random.Random, s3_bucket: str, http_port: int, redis_url: str):
    """URLs holding raw generated secrets (``/`` in a password, ``?``, ``#``: not RFC, but typed),
    and a query-string password: (secret, URL) for S3, HTTP and Redis."""
    host = redis_url.partition("://")[2].partition("/")[0]
    out = []
    for _ in range(2):
        key, secret = "AKIA" + generated_secret(rng, ""), generated_secret(rng)
        out.append(("s3", [secret], f"s3://{key}:{secret}@{s3_bucket}"))  # the key id is shown
        user, pw = generated_secret(rng, "@%"), generated_secret(rng)
        out.append(("http", [pw], f"http://{user}:{pw}@127.0.0.1:{http_port}"))
        pw = generated_secret(rng)
        out.append(("redis", [pw], f"redis://:{pw}@{host}/0"))
        pw = generated_secret(rng)
        out.append(("redis", [pw], f"redis://{host}/0?password={quote(pw, safe='')}"))
    return out


@pytest.mark.parametrize("seed", [1, 2])
@pytest.mark.slow
def test_a_secret_no_client_can_use_reaches_nothing(tmp_path, dumps, s3, redis_url, seed):
    """Raw secrets a client cannot parse, given to every command and every URL option: each
    command fails with one line (exit 2), and no word of any secret is printed or stored (a
    failed --against check claims no work dir: no state.json). Guards: the user: rule of
    userinfo_span (mutation: drop ``end = max(end, body.rfind("@"))``: the S3 secret holding / is
    printed), query secrets (mutation: drop the ``_SECRET_PARAM.sub``), the Redis refusal
    that echoes nothing of a misread password (mutation: ``crossing = False``: ``Port could not be
    cast to integer value as 'PART'``)."""
    rng = random.Random(seed)
    a = dumps / "a.jsonl"
    commands, secrets = [], []
    for i, (kind, hidden, url) in enumerate(failing_urls(rng, s3.bucket, free_port(), redis_url)):
        secrets += hidden
        folder = f"{url}/dir{i}"
        index = url if kind == "redis" else f"{url}/idx{i}"
        commands += [
            ("dedup", a, "-o", tmp_path / f"out{i}", "--work-dir", tmp_path / f"work{i}", "--against", index),
            ("index", "add", index, a),
            ("index", "query", index, a),
            ("index", "stats", index),
            ("index", "verify", index),
            ("index", "compact", index),
            ("index", "remove", index, "--source", "x"),
        ]
        if kind != "redis":
            commands += [
                ("dedup", f"{folder}/a.jsonl", "-o", tmp_path / f"in{i}"),
                ("dedup", a, "-o", folder),
                ("dedup", a, "-o", tmp_path / f"wd{i}", "--work-dir", folder),
                ("report", folder),
                ("audit", f"{folder}/a.jsonl"),
                ("index", "add", tmp_path / f"idx{i}", f"{folder}/a.jsonl"),
            ]
    ran = run_all(commands)
    assert {r.returncode for _, r in ran} == {2}, [(args, r.returncode, r.stderr) for args, r in ran
                                                    if r.returncode != 2]
    assert all(len(r.stderr.strip().splitlines()) == 1 for _, r in ran)
    # an --against that cannot be opened is refused before the work dir is claimed (nothing stored);
    # the state.json of a run that uses such a URL is searched by the success test
    assert not any((tmp_path / f"work{i}" / "state.json").exists() for i in range(3))
    assert_hidden(secrets, ran, root=tmp_path, redis_url=redis_url)


def test_the_exceptions_an_api_user_gets_hold_no_secret(tmp_path, dumps, s3):
    """The exceptions themselves, not only the command line's line (which redacts again).
    Guards: translate redacts its whole message (mutation: ``return type(err)(redact(str(err)))``
    -> ``return err``: boto's ``Invalid bucket name "KEY:SECRET@bucket"`` reaches the
    exception), and the unknown protocol's message (mutation: ``f"{redact(url)}: unknown
    protocol`` -> ``f"{url}: unknown protocol``)."""
    from neardup import api
    from neardup.errors import NeardupError

    rng = random.Random(29)
    for _ in range(3):
        secret = generated_secret(rng)
        url = f"s3://AKIAEXAMPLE:{secret}@{s3.bucket}/out"
        for call in (lambda: api.report(url), lambda: api.dedup([f"{url}/a.jsonl"], output=tmp_path / "o"),
                     lambda: api.dedup([dumps / "a.jsonl"], output=url),
                     lambda: api.dedup([f"nosuchstore://AKIAEXAMPLE:{secret}@host/a.jsonl"], output=tmp_path / "o")):
            with pytest.raises(NeardupError) as caught:
                call()
            assert not leaked(secret, str(caught.value)), str(caught.value)
