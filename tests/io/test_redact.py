"""``redact`` (io/storage/paths.py) hides secrets of any shape (issue 29): a user or a password
holding ``@ / : % ? #`` or unicode, raw or percent-encoded, a password in the query string, a
one-letter one; and where a library's message quotes the secret again, there too. The secrets
are generated (a seeded generator, tests/generated_secrets.py); what a test searches for is each
of their words, so a secret leaked in parts is found too."""

from __future__ import annotations

import random
from urllib.parse import quote, unquote

import pytest

from generated_secrets import generated_secret, leaked
from neardup.io.storage.paths import redact, userinfo_span, without_credentials

SCHEMES = ["s3", "http", "https", "redis", "rediss", "gs", "simplecache::s3"]


def cases(n=400, seed=29):
    """(a message holding a URL with a secret, the secret, the host that must stay visible)."""
    rng = random.Random(seed)
    for _ in range(n):
        scheme = rng.choice(SCHEMES)
        host = rng.choice(["bucket", "127.0.0.1:6379", "example.com"])
        path = rng.choice(["", "/0", "/in/a.jsonl", "/out/"])
        secret = generated_secret(rng)
        user = rng.choice(["", "KEY", "AKIAEXAMPLE", generated_secret(rng, "@/%?#")])
        form = rng.choice(["raw", "encoded", "query", "token"])
        if form == "raw":
            url = f"{scheme}://{user}:{secret}@{host}{path}"
        elif form == "encoded":
            url = f"{scheme}://{quote(user, safe='')}:{quote(secret, safe='')}@{host}{path}"
        elif form == "query":
            name = rng.choice(["password", "pass", "token", "access_token", "X-Amz-Signature",
                               "X-Amz-Credential", "X-Amz-Security-Token", "sig", "api_key"])
            url = f"{scheme}://{host}{path or '/'}?prefix=p:&{name}={quote(secret, safe='')}&x=1"
        else:  # a lone token: raw but for / (a path holding @ otherwise, see userinfo_span) and
            # : (then it is user:password, the user shown)
            secret = secret.replace("/", "").replace(":", "")
            url = f"{scheme}://{secret}@{host}{path}"
        # what a library's message may add: the secret again, decoded, or the URL as it misread it
        quoted = rng.choice([f"{user}:{unquote(secret)}@{host}", unquote(secret), url.partition("://")[2], ""])
        yield f"cannot open '{url}': {quoted} (errno 2)", secret, host.split(":")[0]


@pytest.mark.parametrize("seed", [29, 30])
def test_no_generated_secret_survives_redact(seed):
    """Guard: the userinfo ends at the last @ (mutation: ``authority.rfind("@")`` ->
    ``authority.find("@")``: the part after a password's first @ is shown), a ``user:`` before a
    later @ makes that @ the end (mutation: drop ``end = max(end, body.rfind("@"))``: a password
    holding / is shown), query secrets (mutation: drop the ``_SECRET_PARAM.sub``), the secret's
    parts elsewhere (mutation: ``_pieces`` returns ``[secret]``)."""
    for text, secret, host in cases(seed=seed):
        shown = redact(text)
        assert not leaked(secret, shown), (text, shown)
        assert host in shown, (text, shown)
        assert redact(shown) == shown  # redacting twice changes nothing more


def test_the_findings_of_issue_29():
    """Guard: the last @ of the authority ends a lone token too (mutation: ``authority.rfind("@")``
    -> ``authority.find("@")``: ``***@en@host``)."""
    assert redact("redis://:p@ssword@host/0") == "redis://***@host/0"
    assert redact("rediss://tok@en@host/0 at en@host") == "rediss://***@host/0 at en@host"
    assert redact("s3://AKIA:wJalr/XUtnFEMI@bucket/x") == "s3://AKIA:***@bucket/x"
    assert redact("redis://host/0?password=hunter22") == "redis://host/0?password=***"
    # a one-letter password: its URL's span only, never every "p" of the text
    assert redact("http://u:p@h/x and https://h/p") == "http://u:***@h/x and https://h/p"
    assert redact("s3://K:a/b@bucket/x: parse error at 'b'") == "s3://K:***@bucket/x: parse error at 'b'"


def test_what_is_not_a_secret_is_left_alone():
    assert redact("see s3://K:S@b/x and gs://b/y@z") == "see s3://K:***@b/x and gs://b/y@z"
    assert redact("/plain/path@home: user:pw@x") == "/plain/path@home: user:pw@x"
    assert redact("redis://h:6379/0?prefix=idx:&db=1") == "redis://h:6379/0?prefix=idx:&db=1"
    assert redact("s3://bucket/2024/a.jsonl") == "s3://bucket/2024/a.jsonl"


def test_userinfo_span_and_without_credentials_agree():
    """Guard: the bucket of a URL whose password holds / (mutation: without_credentials splits at
    the first / again: ``no such bucket: KEY:ab``, a part of the secret)."""
    url = "s3://KEY:ab/cd@bucket/x"
    first, end = userinfo_span(url)
    assert url[first:end] == "KEY:ab/cd"
    assert without_credentials(url) == "bucket/x"
    assert without_credentials("gs://b/y@z") == "b/y@z"
    assert userinfo_span("http://host/x") is None
