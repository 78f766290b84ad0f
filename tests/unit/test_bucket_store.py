"""The S3-compatible server the suite runs (moto, :mod:`harness.bucket`), held to what the shared journal trusts it
for, through the journal's own store layer (:mod:`pulumi_together_rl.ownership.stores`):

* **create-if-absent is atomic**: 32 writers of one key at once, exactly one winner, its bytes stored, round after
  round (a server that only *accepts* ``If-None-Match: *`` lets several win);
* **a store that ignores conditional writes is refused** by :meth:`Store.verify`, naming its URL: a real HTTP
  server on loopback that speaks enough S3 (PUT, GET, DELETE) and ignores ``If-None-Match``;
* the harness's server start fails with moto's own output when moto cannot start.
"""

from __future__ import annotations

import email.utils
import hashlib
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from harness import bucket as harness_bucket
from harness.bucket import Bucket, S3Server

from pulumi_together_rl.ownership.stores import StoreError
from pulumi_together_rl.ownership.stores.bucket import BucketStore

WRITERS = 32
ROUNDS = 4


def race(url: str, key: str) -> list[str | None]:
    """``WRITERS`` threads, each with its own client, create ``key`` at once: each one's answer."""
    stores = [BucketStore(url) for _ in range(WRITERS)]
    start = threading.Barrier(WRITERS)
    answers: list[str | None] = [None] * WRITERS
    failures: list[BaseException] = []

    def write(index: int) -> None:
        try:
            start.wait(timeout=30)
            answers[index] = stores[index].create(key, f"writer {index}".encode())
        except BaseException as exc:  # surfaced below: a thread's failure must fail the test
            failures.append(exc)

    threads = [threading.Thread(target=write, args=(i,)) for i in range(WRITERS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert not failures, failures
    return answers


def test_create_if_absent_on_the_suites_s3_server_has_exactly_one_winner_among_32_writers(bucket):
    url = bucket.store_url("journal")
    for round_ in range(ROUNDS):
        key = f"claims/race-{round_}"
        answers = race(url, key)

        winners = [i for i, version in enumerate(answers) if version is not None]
        assert len(winners) == 1, f"round {round_}: {len(winners)} writers won: {winners}"
        stored = BucketStore(url).read(key)
        assert stored is not None and stored.data == f"writer {winners[0]}".encode()
        assert stored.version == answers[winners[0]]


def test_the_suites_s3_server_passes_the_store_probe(bucket):
    assert BucketStore(bucket.store_url("journal")).verify() is not None


# ------------------------------------------------------------------------------------------ a careless server


class CarelessS3(BaseHTTPRequestHandler):
    """Path-style S3 objects in memory: PUT, GET, HEAD and DELETE, ``If-None-Match`` and ``If-Match`` ignored
    (every PUT wins), as some S3-compatible servers did."""

    objects: dict[str, tuple[bytes, str, float]] = {}

    def do_PUT(self) -> None:
        data = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        etag = '"' + hashlib.md5(data).hexdigest() + '"'
        self.objects[self.path] = (data, etag, time.time())
        self._answer(200, b"", {"ETag": etag})

    def do_GET(self) -> None:
        self._get(body=True)

    def do_HEAD(self) -> None:
        self._get(body=False)

    def do_DELETE(self) -> None:
        self.objects.pop(self.path, None)
        self._answer(204, b"", {})

    def _get(self, body: bool) -> None:
        found = self.objects.get(self.path)
        if found is None:
            error = b"<?xml version='1.0'?><Error><Code>NoSuchKey</Code><Message>none</Message></Error>"
            self._answer(404, error if body else b"", {"Content-Type": "application/xml"})
            return
        data, etag, modified = found
        headers = {"ETag": etag, "Last-Modified": email.utils.formatdate(modified, usegmt=True)}
        self._answer(200, data if body else b"", headers, length=len(data))

    def _answer(self, status: int, data: bytes, headers: dict[str, str], length: int | None = None) -> None:
        self.send_response(status)
        for name, value in headers.items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(data) if length is None else length))
        self.end_headers()
        if data:
            self.wfile.write(data)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def careless_s3():
    server = ThreadingHTTPServer(("127.0.0.1", 0), CarelessS3)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        CarelessS3.objects.clear()


def test_a_store_that_lets_a_second_create_if_absent_win_is_refused_naming_its_url(careless_s3, monkeypatch):
    journals = Bucket("journals", careless_s3)
    for key, value in journals.env.items():
        monkeypatch.setenv(key, value)
    url = journals.store_url("team")
    store = BucketStore(url)
    assert store.create("probe-of-the-test", b"one") is not None  # it speaks S3 well enough to be used

    with pytest.raises(StoreError) as refused:
        store.verify()

    assert careless_s3 in refused.value.location and "journals/team" in refused.value.location
    assert "second create-if-absent" in refused.value.cause
    assert str(refused.value).startswith(refused.value.location)


# ------------------------------------------------------------------------------------------ the harness


def test_the_s3_server_that_cannot_start_fails_with_motos_own_output(monkeypatch):
    with harness_bucket.socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        monkeypatch.setattr(harness_bucket, "free_port", lambda: taken.getsockname()[1])
        with pytest.raises(RuntimeError) as failed:
            S3Server().start(attempts=1)
    assert "did not start" in str(failed.value) and "Address already in use" in str(failed.value)
