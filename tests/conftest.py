"""Shared fixtures (no autouse: every test asks for what it uses), and the suite's rules.

* The folders mirror src/neardup/ (kernels, io, stages, engines, index, cli, report) plus e2e for
  whole runs; no __init__.py, so every test file has a name of its own across the folders.
* Helpers shared by modules (tests/helpers.py: the CLI runners, the JSONL writer, the servers'
  handles; tests/index_corpus.py) are imported by name: this file puts tests/ on sys.path.
* ``@pytest.mark.slow`` (a whole module through ``pytestmark``, or one test): Ray, the S3 and
  Redis servers, large corpora, runs killed or interrupted, fresh processes started many times.
  ``python -m pytest -q -m "not slow"`` is the developers' inner loop; CI runs everything.
* What .ci/run installs (the [test] extra: ray, pandas, matplotlib, datasets, s3fs, moto, redis,
  ...; apt's redis-server and chromium) is imported plainly: without it a test fails, never skips.
  Only what CI does not install may skip, with a comment that says so.
"""

import itertools
import logging
import os
import sys
import time

import numpy as np
import pytest

# A child run with a HOME of its own (the Ray clusters of test_ray_join, whose workers would find
# no kernel cache there and compile every kernel again, ~40 CPU-s a process) uses the suite's
# kernel cache: the folder neardup uses by default. Tests of the cache's place set it themselves.
os.environ.setdefault("NUMBA_CACHE_DIR", os.path.join(os.path.expanduser("~"), ".cache", "neardup", "numba"))

HERE = os.path.dirname(os.path.abspath(__file__))
if HERE not in sys.path:  # pytest's default import mode puts it there; --import-mode=importlib does not
    sys.path.insert(0, HERE)

from helpers import S3, SUITE_RAY, RedisServer, free_port, s3_env, stop_suite_ray  # noqa: E402

_ENV_CLEARED = ("AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_SECURITY_TOKEN", "AWS_ENDPOINT_URL_S3",
                "AWS_SHARED_CREDENTIALS_FILE", "AWS_CONFIG_FILE")
_buckets = itertools.count()
_SESSION = f"{os.getpid()}-{int(time.time() * 1000) % 10**8}"


def _jaccard_pairs(jaccards, size=200, seed=0):
    """Pairs of sets of random 64-bit hashes with a controlled exact Jaccard.

    For each target J the union has ``size`` distinct hashes, round(J * size) of them shared, the
    rest split between the two sides. Returns (offsets int64[2m+1], hashes uint64, exact J float64[m]):
    documents 2i and 2i+1 form pair i, each sorted and unique, as :func:`neardup.kernels.verify.exact_jaccard`
    and ``MinHasher.signatures_from_sets`` expect.
    """
    rng = np.random.default_rng(seed)
    jaccards = np.asarray(jaccards, dtype=np.float64)
    m = len(jaccards)
    common = np.rint(jaccards * size).astype(np.int64)
    only_a = (size - common) // 2
    only_b = size - common - only_a
    raw = rng.integers(0, np.iinfo(np.uint64).max, size=(m, size), dtype=np.uint64, endpoint=True)
    sets, offsets = [], [0]
    for i in range(m):
        vals = raw[i]
        if len(np.unique(vals)) != size:  # pragma: no cover - probability about size^2 / 2^65
            vals = np.unique(np.concatenate([vals, rng.integers(0, 1 << 62, size=size, dtype=np.uint64)]))[:size]
        c, a = common[i], only_a[i]
        for part in (vals[:c + a], np.concatenate([vals[:c], vals[c + a:]])):
            part = np.sort(part)
            sets.append(part)
            offsets.append(offsets[-1] + len(part))
    exact = common / float(size)
    return np.asarray(offsets, dtype=np.int64), np.concatenate(sets), exact


@pytest.fixture
def jaccard_pairs():
    """Factory: ``jaccard_pairs(jaccards, size=200, seed=0) -> (offsets, hashes, exact_jaccard)``."""
    return _jaccard_pairs


# --------------------------------------------------------------------------- a real S3 API: moto's server mode

@pytest.fixture(scope="session")
def s3_server():
    """The endpoint URL of a moto S3 server on the loopback interface, for the whole session."""
    from moto.server import ThreadedMotoServer

    port = free_port()
    logging.getLogger("werkzeug").setLevel(logging.WARNING)  # one line per request otherwise
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.stop()


@pytest.fixture
def s3(s3_server, monkeypatch) -> S3:
    """A fresh bucket on the session's server, with the environment (``AWS_ENDPOINT_URL``, fake
    credentials, a region) pointing at it."""
    for k in _ENV_CLEARED:
        monkeypatch.delenv(k, raising=False)
    for k, v in s3_env(s3_server).items():
        monkeypatch.setenv(k, v)
    # unique across test sessions too: a run to a URL keeps its local work dir under a name made
    # from the URL, and an earlier session's failed run must not be found there
    bucket = f"neardup-test-{_SESSION}-{next(_buckets)}"
    handle = S3(s3_server, bucket)
    handle.client.create_bucket(Bucket=bucket)
    return handle


# --------------------------------------------------------------------------- redis-server

@pytest.fixture(scope="module")
def ray_local(request):
    """A local Ray instance (2 CPUs), as a user without a cluster starts one: its GCS address (for
    ``--ray-address``). One instance serves the modules that ask for it one after the other (a
    Ray start and stop cost seconds): started by the first, stopped after a module whose next
    test does not ask (an idle Ray costs CPU too), or by :func:`helpers.stop_suite_ray`. One
    already connected in this process otherwise is used as it is."""
    import ray
    if not ray.is_initialized():
        ray.init(address="local", num_cpus=2, include_dashboard=False, logging_level=logging.WARNING,
                 log_to_driver=False)
        SUITE_RAY["started"] = True
    yield ray.get_runtime_context().gcs_address
    items = request.session.items
    ours = [i for i, item in enumerate(items) if item.module is request.module]
    following = items[max(ours) + 1:max(ours) + 2] if ours else []
    if not any("ray_local" in item.fixturenames for item in following):
        stop_suite_ray()


@pytest.fixture(scope="module")
def redis_server(tmp_path_factory):
    """A redis-server on a free loopback port for the module (see :class:`helpers.RedisServer`)."""
    server = RedisServer(tmp_path_factory.mktemp("redis")).start()
    yield server
    server.stop()


_REDIS_DBS = itertools.cycle(range(1, 16))


@pytest.fixture
def redis_url(redis_server):
    """A fresh database (flushed) of the module's redis-server for each test."""
    import redis
    url = redis_server.url(next(_REDIS_DBS))
    redis.Redis.from_url(url).flushdb()
    return url
