"""An S3-compatible server on loopback for the tests that keep a stack's state (and its create journal) in a bucket.

The server is moto's server mode (``python -m moto.server``): pure Python, already a dev dependency, no account
and no licence to accept, and it speaks the conditional writes the journal is built on (``If-None-Match: *`` and
``If-Match``). Its create-if-absent is trusted because the race test says so
(``tests/unit/test_bucket_store.py``: 32 writers of one key, exactly one winner, against this very server), not
because it accepts the header.

:class:`S3Server` is one server process (the suite starts one per pytest-xdist worker); :meth:`S3Server.bucket`
makes a fresh :class:`Bucket` (one per test), whose :attr:`Bucket.url` is the backend URL the Pulumi CLI logs into
and the provider reads, and whose :attr:`Bucket.env` is what both need to reach it (moto takes any credentials).
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from typing import Any
from urllib.parse import unquote, urlsplit

import httpx

REGION = "us-east-1"
STARTUP_TIMEOUT = 30.0
"""Seconds the server gets to answer its first request (moto imports every service it knows: a few seconds)."""


AWS_ENV = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_REGION": REGION,
    "AWS_DEFAULT_REGION": REGION,
    "AWS_EC2_METADATA_DISABLED": "true",
}
"""What reaches moto's server (it takes any credentials): its region, and no instance-metadata lookups (nothing
answers them on a test machine)."""


def free_port() -> int:
    """A loopback port nobody listens on now (the kernel's choice)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@dataclasses.dataclass(frozen=True)
class Bucket:
    """One bucket of the server, and how a ``pulumi`` command or the provider reaches it."""

    name: str
    endpoint: str
    """``127.0.0.1:<port>``: the form gocloud.dev's ``endpoint`` query parameter takes (with ``disableSSL``)."""
    prefix: str = "state"

    @property
    def url(self) -> str:
        """The backend URL: ``pulumi login <url>`` and ``PULUMI_BACKEND_URL`` take it, and the provider finds the
        journal beside it."""
        return (
            f"s3://{self.name}/{self.prefix}?endpoint={self.endpoint}&disableSSL=true&s3ForcePathStyle=true"
            f"&region={REGION}"
        )

    def store_url(self, prefix: str) -> str:
        """A URL of the same bucket under another prefix (a store of its own, for the store tests)."""
        return dataclasses.replace(self, prefix=prefix).url

    @property
    def env(self) -> dict[str, str]:
        """What the CLI (gocloud.dev) and the provider (obstore) need to reach the server: credentials (moto takes
        any), the region, and no instance-metadata lookups (nothing answers them on a test machine)."""
        return dict(AWS_ENV)

    def keys(self, prefix: str = "") -> list[str]:
        """Every key of the bucket under ``prefix`` (S3 ListObjectsV2, one page: a test's bucket is small)."""
        answer = httpx.get(
            f"http://{self.endpoint}/{self.name}", params={"list-type": "2", "prefix": prefix}, timeout=10
        )
        answer.raise_for_status()
        import xml.etree.ElementTree as ElementTree

        tree = ElementTree.fromstring(answer.text)
        return [node.text or "" for node in tree.iter() if node.tag.endswith("}Key") or node.tag == "Key"]


ONE_AT_A_TIME = (
    "import sys, werkzeug.serving as serving\n"
    "from moto import server\n"
    "threaded = serving.run_simple\n"
    "serving.run_simple = server.run_simple = lambda *a, **k: threaded(*a, **{**k, 'threaded': False})\n"
    "sys.argv[0] = 'moto.server'\n"
    "server.main()\n"
)
"""moto's server, answering one request at a time. S3 applies a conditional write (``If-None-Match: *``,
``If-Match``) atomically; moto checks the condition and writes in two steps, and its threaded server lets two
requests interleave between them (seen: two of 32 racing creates of one key both won). Served one at a time,
each request is whole before the next begins, which is the guarantee the journal relies on from S3; the race
tests then judge the client's use of it, not moto's threads."""


class S3Server:
    """moto's S3 server on a loopback port, as a child process: :meth:`start` waits until it answers, and fails
    with moto's own output if it dies first; :meth:`stop` ends it."""

    def __init__(self) -> None:
        self.port = 0
        self.process: subprocess.Popen[bytes] | None = None
        self._log = tempfile.TemporaryFile()
        handle, self._recording = tempfile.mkstemp(prefix="moto-recording-")  # moto's recorder writes here
        os.close(handle)

    @property
    def endpoint(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self, attempts: int = 3) -> S3Server:
        """Start the server; a port taken between the choice and the bind is tried again with another."""
        for attempt in range(attempts):
            self.port = free_port()
            self._log.seek(0)
            self._log.truncate()
            self.process = subprocess.Popen(
                [sys.executable, "-c", ONE_AT_A_TIME, "-H", "127.0.0.1", "-p", str(self.port)],
                stdout=self._log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env={**os.environ, "MOTO_PORT": str(self.port), "MOTO_RECORDER_FILEPATH": self._recording},
                start_new_session=True,  # a Ctrl-C of the test run is the suite's to handle, not the server's
            )
            if self._wait_until_it_answers():
                return self
            output = self.output()
            self.stop()
            if "Address already in use" not in output or attempt == attempts - 1:
                raise RuntimeError(f"the S3 server (moto) did not start on {self.endpoint}:\n{output}")
        raise AssertionError("unreachable")

    def _wait_until_it_answers(self) -> bool:
        """True once the server answers HTTP; False when it exited; a timeout fails with its output."""
        assert self.process is not None
        deadline = time.monotonic() + STARTUP_TIMEOUT
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                return False
            with contextlib.suppress(httpx.HTTPError):
                httpx.get(f"http://{self.endpoint}/moto-api/data.json", timeout=2)
                return True
            time.sleep(0.1)
        output = self.output()
        self.stop()
        raise RuntimeError(
            f"the S3 server (moto) did not answer on {self.endpoint} within {STARTUP_TIMEOUT:g} s:\n{output}"
        )

    def output(self) -> str:
        """What the server printed (its log and any traceback)."""
        self._log.seek(0)
        return self._log.read().decode(errors="replace")

    @contextlib.contextmanager
    def recording(self) -> Iterator[list[tuple[str, str]]]:
        """The requests the server answers meanwhile, as ``(method, URL path and query, percent-decoded)`` in
        order, filled in when the block ends: moto's own recorder (``/moto-api/recorder/``), so that a test counts
        what a command costs the bucket. One server serves one test at a time (one per pytest-xdist worker)."""
        base = f"http://{self.endpoint}/moto-api/recorder"
        httpx.post(f"{base}/reset-recording", timeout=10).raise_for_status()
        httpx.post(f"{base}/start-recording", timeout=10).raise_for_status()
        seen: list[tuple[str, str]] = []
        try:
            yield seen
        finally:
            httpx.post(f"{base}/stop-recording", timeout=10).raise_for_status()
            answer = httpx.get(f"{base}/download-recording", timeout=10)
            answer.raise_for_status()
            for line in answer.text.splitlines():
                if line.strip():
                    request = json.loads(line)
                    parts = urlsplit(request["url"])
                    where = unquote(parts.path) + (f"?{unquote(parts.query)}" if parts.query else "")
                    seen.append((request["method"], where))

    def bucket(self, name: str | None = None) -> Bucket:
        """A fresh, empty bucket (S3 CreateBucket); its name is unique unless given."""
        made = Bucket(name or f"t-{uuid.uuid4().hex[:16]}", self.endpoint)
        answer = httpx.put(f"http://{self.endpoint}/{made.name}", timeout=10)
        if answer.status_code != 200:
            raise RuntimeError(
                f"creating bucket {made.name} on {self.endpoint}: {answer.status_code} {answer.text}"
            )
        return made

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.process = None

    def __enter__(self) -> S3Server:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
        self._log.close()
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self._recording)


def aws_client(service: str, endpoint: str) -> Any:
    """A boto3 client of ``service`` at the server on ``endpoint`` (``127.0.0.1:<port>``), with :data:`AWS_ENV`'s
    credentials: boto3 is moto's own client library, not the code under test, and what the tests set up or read
    the servers with."""
    import boto3

    return boto3.client(
        service,
        endpoint_url=f"http://{endpoint}",
        region_name=REGION,
        aws_access_key_id=AWS_ENV["AWS_ACCESS_KEY_ID"],
        aws_secret_access_key=AWS_ENV["AWS_SECRET_ACCESS_KEY"],
    )


def read_object(bucket: Bucket, key: str) -> bytes | None:
    """The bytes at ``key`` of ``bucket`` (None: no such key), read with boto3 (moto's own client library: not the
    code under test), signed with the bucket's credentials (moto refuses an unsigned read of an object: 403):
    what a test checks the journal or the state by."""
    from botocore.exceptions import ClientError

    client = aws_client("s3", bucket.endpoint)
    try:
        return client.get_object(Bucket=bucket.name, Key=key)["Body"].read()
    except ClientError as exc:
        if exc.response.get("Error", {}).get("Code") in ("NoSuchKey", "404"):
            return None
        raise
