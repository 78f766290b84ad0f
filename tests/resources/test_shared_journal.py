"""The create journal in a bucket shared by machines: leases, claims, and where it is found.

The bucket is a real S3-compatible server on loopback (moto, ``journal_in_bucket``); another machine's create is a
real process with its own provider (``Creator``), paused with SIGSTOP or killed with SIGKILL. Every behaviour of
the journal itself also runs on the bucket in test_create_journal.py; the CLI scenarios (runners thrown away, a
CI cancel) are in tests/e2e.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from harness.bucket import S3Server
from harness.cli import wait_until
from harness.journals import entries

from pulumi_together_rl.messages import UserError
from pulumi_together_rl.ownership import journal, location, stores
from pulumi_together_rl.ownership.records import State

from .conftest import MODEL, OWNER

RESOURCES = "/v1/rl/model-resources"
GPU = OWNER + "gpu"

CREATOR = """
import sys
from pulumi.dynamic import Config, ConfigureRequest
from pulumi_together_rl.resources.model_resource import _ModelResourceProvider

provider = _ModelResourceProvider()
provider.configure(ConfigureRequest(config=Config(
    raw_config={"together:apiKey": sys.argv[1], "together:baseUrl": sys.argv[2]}, project_name="test")))
checked = provider.check({}, {"base_model": sys.argv[3], "owner": sys.argv[4]})
try:
    print("CREATED", provider.create(checked.inputs).id, flush=True)
except Exception as exc:
    print("FAILED", exc, flush=True)
"""


class Creator:
    """Another machine's create of the rig's ``gpu`` declaration: a process of its own, same bucket."""

    def __init__(self, rig, owner: str = GPU) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-c", CREATOR, rig.emulator.api_key, rig.emulator.base_url, MODEL, owner],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, "TOGETHER_RL_POLL_INTERVAL": "0.05"},
        )

    def signal(self, signum: int) -> None:
        os.kill(self.process.pid, signum)

    def result(self, timeout: float = 60) -> tuple[str, str]:
        out, err = self.process.communicate(timeout=timeout)
        return out.strip(), err

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
        self.process.communicate()


def recorded_ids() -> list[str]:
    return [s.entry.id for s in entries() if s.entry.id]


def bucket_keys(url: str) -> list[str]:
    return sorted(item.key for item in stores.open_store(url).listing(""))


def active(rig) -> list[dict]:
    gone = ("STOPPING", "STOPPED", "ERROR")
    return [o for o in rig.control.state()["model_resources"] if not o["status"].endswith(gone)]


@pytest.fixture
def slow_ready(rig):
    """Model resources stay PENDING until the test moves the emulator's clock."""
    rig.control.configure(timings={"resource_pending": 3600.0})
    return rig


# ---------------------------------------------------------------------------------------- where it is


def test_every_entry_and_claim_is_in_the_bucket_and_none_in_the_folder(rig, journal_in_bucket):
    created = rig.create_resource()
    keys = bucket_keys(journal_in_bucket)
    assert [k for k in keys if k.startswith("entries/")] and all(
        k.endswith(".json") for k in keys if "entries/" in k
    )
    assert [k.rsplit("/", 1)[1] for k in keys if k.startswith("claims/")] == [created.id]
    assert not journal.directory().exists() or list(journal.directory().iterdir()) == []
    (seen,) = entries()
    entry = seen.entry
    assert entry.state == State.DONE and entry.id == created.id
    assert entry.lease is not None and entry.lease.holder is None  # released with its last write


def test_with_a_bucket_backend_the_journal_is_beside_its_state_without_configuration(
    rig, journal_in_bucket, monkeypatch, capsys
):
    """Nothing names the journal: the stack's backend is a bucket, so the journal is
    ``<backend>/.together-rl/journal`` in it, never this machine's folder."""
    monkeypatch.delenv("TOGETHER_RL_JOURNAL_URL")
    bucket_url = journal_in_bucket.split("?", 1)[0].rsplit("/", 1)[0]  # s3://journal-xxx
    query = journal_in_bucket.split("?", 1)[1]
    monkeypatch.setenv("PULUMI_BACKEND_URL", f"{bucket_url}/state?{query}")
    location.reset()

    created = rig.create_resource()

    state_side = bucket_keys(f"{bucket_url}/state?{query}")
    assert [k for k in state_side if k.startswith(".together-rl/journal/claims/")] == [
        f".together-rl/journal/claims/{k.rsplit('/', 2)[1]}/{created.id}"
        for k in state_side
        if k.startswith(".together-rl/journal/claims/")
    ]
    assert any(k.startswith(".together-rl/journal/entries/") for k in state_side)
    assert not journal.directory().exists() or list(journal.directory().iterdir()) == []
    err = capsys.readouterr().err
    assert err.count("create journal: s3://") == 1 and "beside the stack's state" in err


def test_a_local_journal_under_ci_says_once_that_it_is_lost_with_the_runner(rig, monkeypatch, capsys):
    monkeypatch.setenv("CI", "true")
    location.reset()
    rig.create_resource()
    rig.create_resource()
    err = capsys.readouterr().err
    assert err.count("a CI runner that is thrown away loses it") == 1
    assert "TOGETHER_RL_JOURNAL_URL" in err


# ---------------------------------------------------------------------------------------- leases


def test_a_live_lease_is_never_taken_over_and_a_killed_holders_lease_runs_out(slow_ready, journal_in_bucket):
    """Another machine's create is at work (its lease renewed): this create waits for it, then refuses and
    creates nothing. Once that machine is killed, its lease runs out and the next create takes the object over
    by its recorded id, without a POST."""
    rig = slow_ready
    other = Creator(rig)
    try:
        made = wait_until(recorded_ids, 30, "the other create's id")[0]
        rig.control.clear_requests()
        with pytest.raises(UserError) as refused:
            rig.create_resource(create_timeout=20)  # a create that took it over would end on its timeout
        assert "another run is creating this declaration now" in str(refused.value)
        assert rig.posts(RESOURCES) == [] and [o["id"] for o in active(rig)] == [made]

        other.signal(signal.SIGKILL)
        other.kill()
        rig.control.advance(3600)
        taken = rig.create_resource()
        assert taken.id == made and rig.posts(RESOURCES) == []
        assert [o["id"] for o in active(rig)] == [made]
    finally:
        other.kill()


def test_a_straggler_that_lost_its_lease_and_then_fails_stops_nothing(slow_ready, journal_in_bucket):
    """A create paused past its lease, taken over by another run, wakes to a failure of its own (its wait reads an
    error): a create that fails stops what it made, but this one is the other run's now. It says it lost the
    lease and stops nothing; the object the winning run holds stays active."""
    rig = slow_ready
    straggler = Creator(rig)
    try:
        made = wait_until(recorded_ids, 30, "the straggler's id")[0]
        straggler.signal(signal.SIGSTOP)
        time.sleep(journal.lease_seconds() + 3)
        rig.control.advance(3600)
        taken = rig.create_resource()
        assert taken.id == made
        rig.control.add_fault(method="GET", path=f"{RESOURCES}/{made}", status=400, times=None)
        rig.control.add_fault(method="GET", path=f"^{RESOURCES}$", status=400, times=None)
        rig.control.clear_requests()
        straggler.signal(signal.SIGCONT)
        out, err = straggler.result()
    finally:
        straggler.kill()
    rig.control.clear_faults()
    assert out.startswith("FAILED") and "lost its create journal lease" in out, out
    assert not [r for r in rig.control.requests() if r["path"].endswith("/stop")], err
    assert [o["id"] for o in active(rig)] == [made]


def test_a_straggler_that_lost_its_lease_never_marks_done_or_stops(slow_ready, journal_in_bucket):
    """A create paused (SIGSTOP) past its lease: another run takes its object over. When it wakes up, every write
    it tries fails: it says so, stops nothing, and leaves the journal as the taker left it."""
    rig = slow_ready
    straggler = Creator(rig)
    try:
        made = wait_until(recorded_ids, 30, "the straggler's id")[0]
        straggler.signal(signal.SIGSTOP)
        time.sleep(journal.lease_seconds() + 3)
        rig.control.advance(3600)
        taken = rig.create_resource()
        assert taken.id == made
        straggler.signal(signal.SIGCONT)
        out, err = straggler.result()
    finally:
        straggler.kill()
    assert out.startswith("FAILED") and "lost its create journal lease" in out
    assert "stopping it" not in err
    assert [o["id"] for o in active(rig)] == [made]
    (seen,) = entries()  # the taker's record only: the straggler wrote nothing after losing
    assert seen.entry.state == State.DONE and seen.entry.id == made and seen.entry.owner == GPU


@pytest.mark.parametrize("gone", ["after-its-id-is-recorded", "during-its-post"])
def test_a_failed_create_whose_journal_cannot_be_reached_stops_nothing_and_says_so(
    slow_ready, monkeypatch, gone
):
    """The bucket's server goes away while a create waits (after its id was recorded, or while its POST was in
    flight, so that the id could not be recorded), then the create fails: whether another run has taken the
    create over cannot be known, so nothing is stopped, and the sentence says the journal could not confirm it
    (never that another run took it over) and what the journal still holds."""
    rig = slow_ready
    with S3Server() as server:
        bucket = server.bucket()
        for key, value in bucket.env.items():
            monkeypatch.setenv(key, value)
        monkeypatch.setenv("TOGETHER_RL_JOURNAL_URL", bucket.store_url("team"))
        monkeypatch.setenv("TOGETHER_RL_LEASE_SECONDS", "3")
        if gone == "during-its-post":
            fault = rig.control.add_fault(
                method="POST", path=f"^{RESOURCES}$", status=None, latency=2.0, times=1
            )
            failure = rig.create_resource_failing()
            wait_until(
                lambda: any(f["id"] == fault and f["fired"] for f in rig.control.faults()), 30, "the POST"
            )
            server.stop()  # the store goes away while the POST is answered
            made = wait_until(lambda: [o["id"] for o in active(rig)], 30, "the POST's object")[0]
        else:
            failure = rig.create_resource_failing()
            url = bucket.store_url("team")
            # Recorded: the id in the entry, then its claim (the record step's two writes; the store gone between
            # them is the claim's own case).
            made = wait_until(
                lambda: recorded_ids() if any("claims/" in k for k in bucket_keys(url)) else [],
                30,
                "the create's id and its claim in the bucket",
            )[0]
            server.stop()  # the store goes away mid-create
        rig.control.clear_requests()
        rig.control.fail_next(
            "model_resource", "MODEL_RESOURCES_ERROR_CODE_PROVISIONING_FAILED", "pods failed"
        )
        rig.control.advance(3600)
        error = failure(120)

    assert isinstance(error, UserError), error
    message = str(error)
    assert message.startswith(f"creating model resource ({made}): "), message
    assert "pods failed" in message  # the create's own cause comes first
    assert "it was not stopped, because the create journal at" in message
    assert "could not confirm that this run still holds the create (it could not be reached" in message
    assert "another run took" not in message and "lost its create journal lease" not in message
    kept = {
        "after-its-id-is-recorded": "the journal keeps its id",
        "during-its-post": "the journal holds its POST but could not record its id either",
    }
    assert kept[gone] in message and kept[next(k for k in kept if k != gone)] not in message
    assert f"POST {RESOURCES}/{made}/stop" in message
    assert not any(r["path"].endswith("/stop") for r in rig.control.requests())


def test_journal_prune_never_drops_an_entry_a_run_on_another_machine_holds(rig, journal_in_bucket, capsys):
    """A create at work elsewhere (its lease renewed in the bucket): `journal prune` refuses it, naming why, and it
    stays; once its holder is gone, the same command drops it."""
    from harness.journals import hold, left

    from pulumi_together_rl.__main__ import main

    held = left("model resource", rig.emulator.base_url, {"base_model": MODEL}, GPU, ident="mr-elsewhere")
    holder = hold(held, journal_in_bucket)
    try:
        assert main(["journal", "prune", held.name]) == 1
        assert "a running `pulumi up` holds it" in capsys.readouterr().err
        assert held.key in {s.key for s in entries()}
    finally:
        holder.kill()
        holder.wait()
    # Its process is gone: this machine can tell (the same kernel), so its lease counts for nothing now.
    assert main(["journal", "prune", held.name]) == 0
    assert held.key not in {s.key for s in entries()}


# ---------------------------------------------------------------------------------------- claims


def test_two_declarations_on_two_machines_never_bind_one_id(rig, journal_in_bucket):
    """Eight processes, each another declaration's create, record the same id at once: one claim wins."""
    code = (
        "import sys, time\n"
        "from datetime import datetime, timezone\n"
        "from pulumi_together_rl.ownership import journal, leases, records\n"
        "where = journal.current(); where.probe()\n"
        f"entry = records.Entry(kind='model resource', base_url={rig.emulator.base_url!r}, body={{'base_model': 'm'}},\n"
        "    owner=sys.argv[2], started_at=datetime.now(timezone.utc), state=records.State.POSTING)\n"
        "held = leases.Holding.begin(where, entry)\n"
        "time.sleep(max(0, float(sys.argv[1]) - time.time()))\n"
        "held.write(id='mr-contested', state=records.State.CREATED)\n"
        "try:\n"
        "    held.bind('mr-contested'); print('bound', held.key, flush=True)\n"
        "except leases.Taken:\n"
        "    print('taken', flush=True)\n"
    )
    start = str(time.time() + 3)
    racers = [
        subprocess.Popen(
            [sys.executable, "-c", code, start, f"{OWNER}rival-{i}"], stdout=subprocess.PIPE, text=True
        )
        for i in range(8)
    ]
    answers = sorted(r.communicate(timeout=60)[0].strip() for r in racers)
    assert [a.split()[0] for a in answers] == ["bound"] + ["taken"] * 7
    winner = answers[0].split()[1]
    found = journal.current().claim(rig.emulator.base_url, "mr-contested")
    assert (
        found is not None and found[0] is not None and found[0].entry == winner
    )  # the claim names the winner


# ---------------------------------------------------------------------------------------- a store it cannot use


class _Refusing(BaseHTTPRequestHandler):
    """An S3 endpoint that reads but refuses every write with S3's own 403 (a read-only or wrong credential)."""

    def _answer(self, status: int, body: bytes, content_type: str = "application/xml") -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:
        listing = b'<?xml version="1.0"?><ListBucketResult><KeyCount>0</KeyCount></ListBucketResult>'
        self._answer(200, listing)

    def do_PUT(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self._answer(403, b"<Error><Code>AccessDenied</Code><Message>Access Denied</Message></Error>")

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def refusing_endpoint():
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Refusing)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


class _ClaimsDenied(BaseHTTPRequestHandler):
    """The loopback S3 server behind a bucket policy that denies writes under ``claims/`` (S3's own 403): every other
    request goes through to it unchanged."""

    upstream = ""

    def _forward(self) -> None:
        import http.client

        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        if self.command == "PUT" and "/claims/" in self.path:
            denied = b"<Error><Code>AccessDenied</Code><Message>Access Denied</Message></Error>"
            self.send_response(403)
            self.send_header("Content-Type", "application/xml")
            self.send_header("Content-Length", str(len(denied)))
            self.end_headers()
            self.wfile.write(denied)
            return
        connection = http.client.HTTPConnection(self.upstream, timeout=30)
        headers = {k: v for k, v in self.headers.items() if k.lower() not in ("connection", "keep-alive")}
        connection.request(self.command, self.path, body=body or None, headers=headers)
        answer = connection.getresponse()
        data = answer.read()
        self.send_response(answer.status)
        for key, value in answer.getheaders():
            if key.lower() not in ("connection", "transfer-encoding", "content-length", "server", "date"):
                self.send_header(key, value)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)
        connection.close()

    do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = _forward

    def log_message(self, *args: object) -> None:
        pass


def test_a_claim_the_store_refuses_leaves_the_id_recorded_in_its_entry_and_says_so(
    rig, journal_in_bucket, bucket, monkeypatch, capsys
):
    """The record step's second write fails alone: the entry records the id, its claim could not be written. The
    line says that, not that the id went unrecorded (the next run of the declaration would take it over)."""
    handler = type("Denied", (_ClaimsDenied,), {"upstream": bucket.endpoint})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = journal_in_bucket.replace(bucket.endpoint, f"127.0.0.1:{server.server_address[1]}")
        assert url != journal_in_bucket
        monkeypatch.setenv("TOGETHER_RL_JOURNAL_URL", url)
        created = rig.create_resource()
    finally:
        server.shutdown()
        monkeypatch.setenv("TOGETHER_RL_JOURNAL_URL", journal_in_bucket)  # read it straight from the server
    err = capsys.readouterr().err
    assert (
        f"warning: model resource {created.id}: created, and the create journal's entry records its id, but its "
        "claim of the id could not be written (" in err
    ), err
    assert "could not record its id" not in err
    keys = bucket_keys(journal_in_bucket)
    assert not [k for k in keys if k.startswith("claims/")], keys
    assert recorded_ids() == [created.id]
    assert [o["id"] for o in active(rig)] == [created.id]


@pytest.mark.parametrize("store", ["closed port", "missing bucket", "read-only"])
def test_a_bucket_it_cannot_write_fails_the_create_before_its_post_naming_the_url(
    rig, journal_in_bucket, bucket, refusing_endpoint, monkeypatch, store
):
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        closed = probe.getsockname()[1]
    url = {
        "closed port": f"s3://journal/team?endpoint=http://127.0.0.1:{closed}&region=us-east-1",
        "missing bucket": f"s3://no-such-bucket/team?endpoint=http://{bucket.endpoint}&region=us-east-1",
        "read-only": f"s3://journal/team?endpoint={refusing_endpoint}&region=us-east-1",
    }[store]
    monkeypatch.setenv("TOGETHER_RL_JOURNAL_URL", url)
    rig.control.clear_requests()
    with pytest.raises(UserError) as failed:
        rig.create_resource()
    text = str(failed.value)
    assert text.startswith("creating model resource") and "s3://" in text and "/team" in text
    assert "nothing was created" in text and "TOGETHER_RL_JOURNAL_URL" in text
    assert rig.posts(RESOURCES) == []
    assert json.dumps(text).count("\\n") == 0  # one sentence


def test_a_laptops_aws_profile_reaches_the_bucket_as_the_cli_does(
    rig, journal_in_bucket, tmp_path, monkeypatch
):
    """No keys in the environment, a profile in ``~/.aws/credentials`` (what `aws configure` writes): the journal
    uses it, as the CLI does for the state. Without it, the create fails before its POST."""
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_REGION", "AWS_DEFAULT_REGION"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    with pytest.raises(UserError, match="cannot be used"):
        rig.create_resource()
    assert rig.posts(RESOURCES) == []

    (tmp_path / ".aws").mkdir()
    (tmp_path / ".aws" / "credentials").write_text(
        "[team]\naws_access_key_id = AKIA1\naws_secret_access_key = s\n"
    )
    (tmp_path / ".aws" / "config").write_text("[profile team]\nregion = us-east-1\n")
    monkeypatch.setenv("AWS_PROFILE", "team")
    stores_seen = set()
    created = rig.create_resource()
    stores_seen.update(k for k in bucket_keys(journal_in_bucket) if k.startswith("claims/"))
    assert any(k.endswith("/" + created.id) for k in stores_seen)


def test_a_bucket_journal_without_the_bucket_extra_is_one_sentence_before_the_post(rig, monkeypatch):
    """The provider installed without its ``bucket`` extra (no obstore) and a stack whose journal is a bucket:
    every create says so in one sentence, naming the extra, before anything is sent."""
    import sys

    monkeypatch.setitem(sys.modules, "obstore", None)  # what `import obstore` meets where it is not installed
    monkeypatch.setenv("TOGETHER_RL_JOURNAL_URL", "s3://team-journal/dev?region=us-east-1")
    rig.control.clear_requests()
    with pytest.raises(UserError) as failed:
        rig.create_resource()
    text = str(failed.value)
    assert text.startswith(
        "creating model resource (Qwen/Qwen3.5-4B): the create journal at s3://team-journal/dev"
    )
    assert "pulumi-together-rl[bucket]" in text and "nothing was created" in text
    assert json.dumps(text).count("\\n") == 0 and "Traceback" not in text
    assert rig.posts(RESOURCES) == []
