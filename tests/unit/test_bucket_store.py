"""The object stores the shared journal trusts, each a real server on loopback, held through the journal's own store
layer (:mod:`pulumi_together_rl.ownership.stores`) to what the journal relies on:

* **S3** (moto's server mode, :mod:`harness.bucket`; the check tier) and **Azure Blob** (Azurite,
  :mod:`harness.azurite`; the release tier, as it is installed from npm first), each parametrized:
  create-if-absent is atomic (32 writers of one key at once, exactly one winner, its bytes stored, round after
  round: a server that only *accepts* ``If-None-Match: *`` lets several win); compare-and-swap is atomic (32
  writers swapping one version of one key, exactly one winner); a swap on a stale version fails and one on the
  current version succeeds; a listed version is the version read; and :meth:`Store.verify` passes;
* **Google Cloud Storage** (fake-gcs-server, :mod:`harness.gcs`; the release tier, as it is built from Go first):
  the store reaches it the way the Pulumi CLI does (``STORAGE_EMULATOR_HOST``, no credentials) and reads what the
  JSON API wrote, but it cannot write there: obstore writes with the XML API's object PUT, which fake-gcs-server
  does not implement, so a ``gs://`` store on it is refused at its first use, and the races do not run on it;
* **a store whose conditional writes are not conditional is refused** by :meth:`Store.verify`, naming its URL and
  what it let happen: real HTTP servers on loopback that speak enough S3 (PUT, GET, DELETE) and ignore
  ``If-None-Match``, or honour it and ignore ``If-Match``, or refuse every ``If-Match``;
* the harness's server start fails with moto's own output when moto cannot start.
"""

from __future__ import annotations

import email.utils
import hashlib
import os
import threading
import time
import uuid
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import unquote

import pytest
from harness import bucket as harness_bucket
from harness.bucket import Bucket, S3Server

from pulumi_together_rl.ownership.stores import StoreError
from pulumi_together_rl.ownership.stores.bucket import BucketStore

WRITERS = 32
ROUNDS = 4

# Azurite is installed from npm before its first test (scripts/azurite.sh): the release tier, with the time a first
# install takes.
SERVED = [
    pytest.param("s3", id="s3"),
    pytest.param("azure", id="azure", marks=[pytest.mark.release, pytest.mark.timeout(1800)]),
]


@pytest.fixture
def store_url(request) -> str:
    """A fresh journal URL on the server the test is parametrized with (a fresh bucket or container, its
    environment set in this process)."""
    made = request.getfixturevalue({"s3": "bucket", "azure": "azure_container"}[request.param])
    return made.store_url(f"journal-{uuid.uuid4().hex[:8]}")


def at_once(url: str, write: Callable[[BucketStore, int], str | None]) -> list[str | None]:
    """``WRITERS`` threads, each with its own client, call ``write(store, index)`` at once: each one's answer."""
    stores = [BucketStore(url) for _ in range(WRITERS)]
    start = threading.Barrier(WRITERS)
    answers: list[str | None] = [None] * WRITERS
    failures: list[BaseException] = []

    def run(index: int) -> None:
        try:
            start.wait(timeout=30)
            answers[index] = write(stores[index], index)
        except BaseException as exc:  # surfaced below: a thread's failure must fail the test
            failures.append(exc)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(WRITERS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert not failures, failures
    return answers


def the_winner(answers: list[str | None], round_: int) -> int:
    winners = [i for i, version in enumerate(answers) if version is not None]
    assert len(winners) == 1, f"round {round_}: {len(winners)} writers won: {winners}"
    return winners[0]


@pytest.mark.parametrize("store_url", SERVED, indirect=True)
def test_create_if_absent_has_exactly_one_winner_among_32_writers(store_url):
    for round_ in range(ROUNDS):
        key = f"claims/race-{round_}"
        answers = at_once(store_url, lambda store, i, key=key: store.create(key, f"writer {i}".encode()))

        winner = the_winner(answers, round_)
        stored = BucketStore(store_url).read(key)
        assert stored is not None and stored.data == f"writer {winner}".encode()
        assert stored.version == answers[winner]


@pytest.mark.parametrize("store_url", SERVED, indirect=True)
def test_compare_and_swap_of_one_version_has_exactly_one_winner_among_32_writers(store_url):
    store = BucketStore(store_url)
    for round_ in range(ROUNDS):
        key = f"entries/lease-{round_}"
        held = store.create(key, b"held by nobody yet")
        assert held is not None

        answers = at_once(
            store_url, lambda writer, i, key=key, held=held: writer.swap(key, f"{i}".encode(), held)
        )

        winner = the_winner(answers, round_)
        stored = store.read(key)
        assert stored is not None and stored.data == f"{winner}".encode()
        assert stored.version == answers[winner]


@pytest.mark.parametrize("store_url", SERVED, indirect=True)
def test_a_swap_on_a_stale_version_fails_and_on_the_current_one_succeeds(store_url):
    store = BucketStore(store_url)
    first = store.create("entries/one.json", b"first")
    assert first is not None
    second = store.swap("entries/one.json", b"second", first)
    assert second is not None and second != first

    assert store.swap("entries/one.json", b"stale", first) is None
    stored = store.read("entries/one.json")
    assert stored is not None and (stored.data, stored.version) == (b"second", second)

    third = store.swap("entries/one.json", b"third", second)
    assert third is not None and third not in (first, second)
    store.remove("entries/one.json")
    assert store.swap("entries/one.json", b"gone", third) is None
    assert store.read("entries/one.json") is None


@pytest.mark.parametrize("store_url", SERVED, indirect=True)
def test_a_listed_version_is_the_version_read_and_a_swap_takes_it(store_url):
    # The journal lists its entries and reads only what changed since it last read them, by version; and it
    # swaps on a version it may have listed.
    store = BucketStore(store_url)
    written = store.create("entries/listed.json", b"listed")
    assert written is not None

    (listed,) = store.listing("entries/")
    stored = store.read("entries/listed.json")
    assert stored is not None
    assert listed.key == "entries/listed.json" and listed.size == len(b"listed")
    assert listed.version == stored.version == written
    assert store.swap("entries/listed.json", b"swapped", listed.version) is not None


@pytest.mark.parametrize("store_url", SERVED, indirect=True)
def test_the_suites_server_passes_the_store_probe(store_url):
    store = BucketStore(store_url)
    assert store.verify() is not None
    assert store.listing("probes/") == []  # the probe leaves nothing behind


# ------------------------------------------------------------------------------------------ Azure's URL grammar


@pytest.mark.release
@pytest.mark.timeout(1800)
def test_an_azblob_url_names_the_local_emulator_in_its_query_as_gocloud_takes_it(
    azure_container, monkeypatch
):
    for name in ("AZURE_STORAGE_DOMAIN", "AZURE_STORAGE_PROTOCOL", "AZURE_STORAGE_IS_LOCAL_EMULATOR"):
        monkeypatch.delenv(name)
    journal = azure_container.store_url("journal")
    by_query = BucketStore(f"{journal}?localemu=true&domain={azure_container.endpoint}&protocol=http")

    assert by_query.create("entries/by-query.json", b"by query") is not None
    assert by_query.location == f"{journal}?localemu=true&domain={azure_container.endpoint}&protocol=http"
    for name, value in azure_container.env.items():
        monkeypatch.setenv(name, value)
    stored = BucketStore(journal).read(
        "entries/by-query.json"
    )  # the same container, named by the environment
    assert stored is not None and stored.data == b"by query"


@pytest.mark.parametrize(
    ("url", "env", "endpoint"),
    [
        ("azblob://c/p", {"AZURE_STORAGE_ACCOUNT": "acct"}, "https://acct.blob.core.windows.net"),
        (
            "azblob://c/p",
            {"AZURE_STORAGE_ACCOUNT": "acct", "AZURE_STORAGE_DOMAIN": "blob.core.usgovcloudapi.net"},
            "https://acct.blob.core.usgovcloudapi.net",
        ),
        (
            "azblob://c/p?storage_account=other&domain=localhost:10000&protocol=http",
            {},
            "http://localhost:10000/other",
        ),
        (
            "azblob://c/p?localemu=true",
            {"AZURE_STORAGE_ACCOUNT": "acct", "AZURE_STORAGE_DOMAIN": "azurite.test:10000"},
            "https://azurite.test:10000/acct",
        ),
        (
            "azblob://c/p?cdn=true&domain=cdn.example.com",
            {"AZURE_STORAGE_ACCOUNT": "acct"},
            "https://cdn.example.com",
        ),
    ],
)
def test_an_azblob_url_gives_obstore_the_service_url_gocloud_builds(url, env, endpoint, monkeypatch):
    for name in list(os.environ):
        if name.startswith("AZURE_"):
            monkeypatch.delenv(name)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    config = BucketStore(url)._store.config
    assert config["endpoint"] == endpoint


# ------------------------------------------------------------------------------------------ GCS


@pytest.mark.release
@pytest.mark.timeout(1800)
def test_a_gs_store_reaches_fake_gcs_server_by_storage_emulator_host_with_no_credentials(gcs_bucket):
    # This machine has no Google credentials and no metadata server: a store that looked for either would fail.
    generation = gcs_bucket.write("entries/one.json", b"written by the JSON API")
    assert generation is not None
    store = BucketStore(gcs_bucket.store_url("state"))

    stored = store.read("entries/one.json")
    (listed,) = store.listing("entries/")

    assert stored is not None and stored.data == b"written by the JSON API"
    assert stored.version.endswith(f"#{generation}")  # the generation a swap is conditional on
    assert listed.key == "entries/one.json" and listed.size == len(b"written by the JSON API")
    assert store.location == gcs_bucket.store_url("state")  # what lines name it by: the URL as given


@pytest.mark.release
@pytest.mark.timeout(1800)
def test_a_gs_store_on_fake_gcs_server_is_refused_at_first_use_since_it_takes_no_xml_api_object_put(
    gcs_bucket,
):
    # obstore writes an object with the XML API (PUT /<bucket>/<object>, x-goog-if-generation-match); fake-gcs-server
    # implements the JSON API's uploads only and answers that PUT 400 "invalid uploadType". Should this fail because
    # the probe passed, fake-gcs-server has learnt the XML API's writes: add "gcs" to SERVED, and the races run there.
    store = BucketStore(gcs_bucket.store_url("journal"))

    with pytest.raises(StoreError) as refused:
        store.verify()

    assert refused.value.location == store.location
    assert refused.value.cause == "it refused the request (400 Bad Request; invalid uploadType)"
    assert store.listing("") == []
    # The server's own conditional upload, the JSON API's (gocloud.dev's), is there and honoured.
    assert gcs_bucket.write("probe", b"one", if_generation_match=0) is not None
    assert gcs_bucket.write("probe", b"two", if_generation_match=0) is None


class RecordingGCS(BaseHTTPRequestHandler):
    """Answers every object PUT as GCS's XML API does when the write lands (200, an ETag and the new generation),
    and keeps each PUT's path and headers: what a ``gs://`` store asks of GCS, seen on the wire."""

    seen: list[tuple[str, dict[str, str]]]

    def do_PUT(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.seen.append((self.path, {name.lower(): value for name, value in self.headers.items()}))
        self.send_response(200)
        self.send_header("ETag", '"d41d8cd98f00b204e9800998ecf8427e"')
        self.send_header("x-goog-generation", str(1000 + len(self.seen)))
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


def test_a_gs_store_writes_on_generations_to_the_storage_emulator_host_without_a_credential(monkeypatch):
    # fake-gcs-server cannot take these writes (see above), so what they ask is checked on the wire: create-if-absent
    # is "generation 0", a swap is conditional on the generation its version carries, and the emulator is sent a
    # placeholder, never a credential.
    handler = type("Handler", (RecordingGCS,), {"seen": []})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        monkeypatch.setenv("STORAGE_EMULATOR_HOST", f"127.0.0.1:{server.server_address[1]}")
        store = BucketStore("gs://journals/team")

        created = store.create("entries/one.json", b"one")
        swapped = store.swap("entries/one.json", b"two", created or "")
    finally:
        server.shutdown()
        server.server_close()

    assert (
        created == '"d41d8cd98f00b204e9800998ecf8427e"#1001'
        and swapped is not None
        and swapped.endswith("#1002")
    )
    (create_path, create_headers), (swap_path, swap_headers) = handler.seen
    assert unquote(create_path) == unquote(swap_path) == "/journals/team/entries/one.json"
    assert create_headers["x-goog-if-generation-match"] == "0"
    assert swap_headers["x-goog-if-generation-match"] == "1001"
    assert "if-match" not in swap_headers
    assert create_headers["authorization"] == "Bearer storage-emulator-needs-no-credential"


# ------------------------------------------------------------------------------------------ a careless server


class CarelessS3(BaseHTTPRequestHandler):
    """Path-style S3 objects in memory: PUT, GET, HEAD and DELETE. How it treats the two conditions of a PUT is
    the subclass's (:func:`careless_s3`): ``ignored`` (the PUT wins, as some S3-compatible servers did),
    ``honoured`` (412 when the condition does not hold, checked and written under one lock) or, for ``If-Match``,
    ``refused`` (412 always)."""

    objects: dict[str, tuple[bytes, str, float]]
    if_none_match = "ignored"
    if_match = "ignored"
    lock = threading.Lock()

    def do_PUT(self) -> None:
        data = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        etag = '"' + hashlib.md5(data).hexdigest() + '"'
        with self.lock:
            found = self.objects.get(self.path)
            wanted = self.headers.get("If-Match")
            if (
                self.headers.get("If-None-Match") == "*"
                and self.if_none_match == "honoured"
                and found is not None
            ):
                self._answer(412, b"", {})
                return
            if wanted is not None and (
                self.if_match == "refused"
                or (self.if_match == "honoured" and (found is None or found[1] != wanted))
            ):
                self._answer(412, b"", {})
                return
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
    """Starts a :class:`CarelessS3` on loopback treating ``If-None-Match`` and ``If-Match`` as told; gives a
    :class:`harness.bucket.Bucket` of it, its credentials in this process's environment."""
    servers: list[ThreadingHTTPServer] = []

    def start(if_none_match: str = "ignored", if_match: str = "ignored") -> Bucket:
        handler = type(
            "Handler",
            (CarelessS3,),
            {"objects": {}, "if_none_match": if_none_match, "if_match": if_match, "lock": threading.Lock()},
        )
        server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        servers.append(server)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        return Bucket("journals", f"127.0.0.1:{server.server_address[1]}")

    yield start
    for server in servers:
        server.shutdown()
        server.server_close()


def refusal_of(journals: Bucket, monkeypatch) -> StoreError:
    """What :meth:`Store.verify` says of a store of ``journals`` (it must refuse it)."""
    for key, value in journals.env.items():
        monkeypatch.setenv(key, value)
    store = BucketStore(journals.store_url("team"))
    assert store.create("probe-of-the-test", b"one") is not None  # it speaks S3 well enough to be used

    with pytest.raises(StoreError) as refused:
        store.verify()

    assert journals.endpoint in refused.value.location and "journals/team" in refused.value.location
    assert str(refused.value).startswith(refused.value.location)
    return refused.value


def test_a_store_that_lets_a_second_create_if_absent_win_is_refused_naming_its_url(careless_s3, monkeypatch):
    refused = refusal_of(careless_s3(), monkeypatch)

    assert refused.cause == (
        "it let a second create-if-absent of one key succeed, so two runs could both take one object"
    )


def test_a_store_that_honours_if_none_match_and_ignores_if_match_is_refused_at_first_use(
    careless_s3, monkeypatch
):
    refused = refusal_of(careless_s3(if_none_match="honoured", if_match="ignored"), monkeypatch)

    assert refused.cause == (
        "it let a compare-and-swap on a stale version succeed, so a run that lost its lease could still write"
    )


def test_a_store_that_refuses_every_compare_and_swap_is_refused_at_first_use(careless_s3, monkeypatch):
    refused = refusal_of(careless_s3(if_none_match="honoured", if_match="refused"), monkeypatch)

    assert refused.cause == (
        "it refused a compare-and-swap on an object's current version, so no run could renew its lease"
    )


def test_a_store_whose_conditional_writes_hold_passes_the_probe_on_the_same_careless_server(
    careless_s3, monkeypatch
):
    # The refusals above are the server's conditions, not the stand-in S3 itself: honouring both, it passes.
    journals = careless_s3(if_none_match="honoured", if_match="honoured")
    for key, value in journals.env.items():
        monkeypatch.setenv(key, value)
    assert BucketStore(journals.store_url("team")).verify() is not None


# ------------------------------------------------------------------------------------------ the harness


def test_the_s3_server_that_cannot_start_fails_with_motos_own_output(monkeypatch):
    with harness_bucket.socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        monkeypatch.setattr(harness_bucket, "free_port", lambda: taken.getsockname()[1])
        with pytest.raises(RuntimeError) as failed:
            S3Server().start(attempts=1)
    assert "did not start" in str(failed.value) and "Address already in use" in str(failed.value)


@pytest.mark.release
@pytest.mark.timeout(1800)
def test_the_azure_server_that_cannot_start_fails_with_azurites_own_output(monkeypatch):
    from harness import loopback_server
    from harness.azurite import AzuriteServer
    from harness.loopback_server import ServerUnavailable

    server = AzuriteServer()
    with harness_bucket.socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        monkeypatch.setattr(loopback_server, "free_port", lambda: taken.getsockname()[1])
        with pytest.raises(ServerUnavailable) as failed:
            server.start(attempts=1)
    server.close()
    assert "did not start" in str(failed.value) and "EADDRINUSE" in str(failed.value)
