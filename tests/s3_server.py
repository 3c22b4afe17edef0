"""A real S3 API on the loopback interface for the tests: moto's server mode.

``s3_server`` (session) starts one server on a free port; ``s3`` (per test) points the standard
environment at it (``AWS_ENDPOINT_URL``, fake credentials, a region), creates a fresh bucket and
gives an :class:`S3` handle: ``url(key)``, ``put(key, bytes)``, ``get(key)``, ``keys(prefix)``.
Use from a test module with ``from s3_server import s3, s3_server  # noqa: F401`` (tests/ is on
sys.path under pytest's default rootdir-relative import mode).
"""

from __future__ import annotations

import itertools
import os
import time
import logging
import socket
from typing import Dict, List

import pytest

boto3 = pytest.importorskip("boto3")
pytest.importorskip("moto.server")
pytest.importorskip("s3fs")

FAKE_ENV = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
            "AWS_DEFAULT_REGION": "us-east-1", "AWS_REGION": "us-east-1"}
_ENV_CLEARED = ("AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_SECURITY_TOKEN", "AWS_ENDPOINT_URL_S3",
                "AWS_SHARED_CREDENTIALS_FILE", "AWS_CONFIG_FILE")
_counter = itertools.count()
_SESSION = f"{os.getpid()}-{int(time.time() * 1000) % 10**8}"


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class S3:
    def __init__(self, endpoint: str, bucket: str):
        self.endpoint = endpoint
        self.bucket = bucket
        self.client = boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1",
                                   aws_access_key_id="testing", aws_secret_access_key="testing")

    def url(self, key: str = "") -> str:
        return f"s3://{self.bucket}/{key}" if key else f"s3://{self.bucket}"

    def put(self, key: str, data) -> str:
        if isinstance(data, str):
            data = data.encode("utf-8")
        self.client.put_object(Bucket=self.bucket, Key=key, Body=data)
        return self.url(key)

    def get(self, key: str) -> bytes:
        return self.client.get_object(Bucket=self.bucket, Key=key)["Body"].read()

    def keys(self, prefix: str = "") -> List[str]:
        out: List[str] = []
        for page in self.client.get_paginator("list_objects_v2").paginate(Bucket=self.bucket, Prefix=prefix):
            out += [o["Key"] for o in page.get("Contents", [])]
        return sorted(out)

    def uploads(self) -> list:
        """Multipart uploads still open (an aborted write leaves none)."""
        return self.client.list_multipart_uploads(Bucket=self.bucket).get("Uploads", [])

    def put_tree(self, prefix: str, files: Dict[str, bytes]) -> str:
        for rel, data in files.items():
            self.put(prefix.rstrip("/") + "/" + rel, data)
        return self.url(prefix)


@pytest.fixture(scope="session")
def s3_server():
    """The endpoint URL of a moto S3 server running for the whole session."""
    from moto.server import ThreadedMotoServer

    port = free_port()
    logging.getLogger("werkzeug").setLevel(logging.WARNING)  # one line per request otherwise
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.stop()


def s3_env(endpoint: str) -> Dict[str, str]:
    """The environment that points boto, s3fs and neardup at ``endpoint`` (for subprocesses)."""
    return dict(FAKE_ENV, AWS_ENDPOINT_URL=endpoint)


@pytest.fixture
def s3(s3_server, monkeypatch) -> S3:
    """A fresh bucket on the session's server, with the environment pointing at it."""
    for k in _ENV_CLEARED:
        monkeypatch.delenv(k, raising=False)
    for k, v in s3_env(s3_server).items():
        monkeypatch.setenv(k, v)
    # unique across test sessions too: a run to a URL keeps its local work dir under a name made
    # from the URL, and an earlier session's failed run must not be found there
    bucket = f"neardup-test-{_SESSION}-{next(_counter)}"
    handle = S3(s3_server, bucket)
    handle.client.create_bucket(Bucket=bucket)
    return handle
