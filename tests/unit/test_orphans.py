"""The orphan finder's logic (pulumi_together_rl.orphans) against the real emulator, without subprocesses.

What a stack holds comes from `pulumi stack export` documents written here in the CLI's shape; the objects are
made through the client, as `pulumi up` (or a notebook) would make them. The command runs in this process
(`orphans.run`), with its standard output and error in one stream, as a terminal shows them, and `now` moved
forward where an object has to be old. The Pulumi CLI side is tested in tests/e2e/test_orphans_cli.py.
"""

from __future__ import annotations

import dataclasses
import io
import json
import subprocess
from datetime import datetime, timedelta, timezone

import pytest
from harness.journals import begun, entries, left

from pulumi_together_rl import backend, orphans, ours
from pulumi_together_rl.__main__ import build_parser
from pulumi_together_rl.client import TogetherRL
from pulumi_together_rl.client.models import ModelResourceCreateRequest, TrainingSessionCreateRequest
from pulumi_together_rl.ownership import journal, location
from pulumi_together_rl.ownership.journal import Seen
from pulumi_together_rl.ownership.records import State

MODEL = "Qwen/Qwen3.5-4B"
RESOURCE_TYPE = "pulumi-python:dynamic/together:ModelResource"
SESSION_TYPE = "pulumi-python:dynamic/together:TrainingSession"


def export_of(*held: tuple[str, str], stack: str = "dev") -> dict:
    """A `pulumi stack export` document whose stack (of project `team`) holds these (type, id) resources."""
    resources = [
        {
            "urn": f"urn:pulumi:{stack}::team::pulumi:pulumi:Stack::team-{stack}",
            "custom": False,
            "type": "pulumi:pulumi:Stack",
        },
        {
            "urn": f"urn:pulumi:{stack}::team::pulumi:providers:pulumi-python::default",
            "custom": True,
            "id": "5e1a9c6e-provider-id",
            "type": "pulumi:providers:pulumi-python",
        },
    ]
    for number, (kind, ident) in enumerate(held):
        resources.append(
            {
                "urn": f"urn:pulumi:{stack}::team::{kind}::r{number}",
                "custom": True,
                "id": ident,
                "type": kind,
                "inputs": {},
                "outputs": {"__provider": "opaque"},
            }
        )
    return {"version": 3, "deployment": {"manifest": {"version": "v3.274.1"}, "resources": resources}}


@pytest.fixture
def client(emulator):
    with TogetherRL(api_key=emulator.api_key, base_url=emulator.base_url) as made:
        yield made


def new_resource(client, **fields) -> str:
    return client.create_model_resource(ModelResourceCreateRequest(base_model=MODEL, **fields)).id


def new_session(client, resource_id: str, **fields) -> str:
    return client.create_training_session(
        TrainingSessionCreateRequest(model_resources_id=resource_id, **fields)
    ).id


def status_of(emulator, ident: str) -> str:
    state = emulator.control.state()
    return next(
        o["status"] for o in state["model_resources"] + state["training_sessions"] if o["id"] == ident
    )


def stop_posts(emulator) -> list[str]:
    return [
        r["path"]
        for r in emulator.control.requests()
        if r["method"] == "POST" and r["path"].endswith("/stop")
    ]


# ------------------------------------------------------------------------------------------ stack states


def test_held_ids_are_the_ids_of_every_resource_and_id_bearing_pending_operation():
    state = export_of((RESOURCE_TYPE, "mr-1"), (SESSION_TYPE, "ts-1"), ("aws:s3/bucket:Bucket", "bucket-1"))
    state["deployment"]["pending_operations"] = [
        {"type": "creating", "resource": {"urn": "urn:x", "type": SESSION_TYPE}},  # no id yet: holds nothing
        {"type": "updating", "resource": {"urn": "urn:y", "type": SESSION_TYPE, "id": "ts-pending"}},
    ]
    other = export_of((RESOURCE_TYPE, "mr-2"))

    held = orphans.held_ids([state, orphans.StackState("prod.json", other)])

    assert held == {"5e1a9c6e-provider-id", "mr-1", "ts-1", "bucket-1", "ts-pending", "mr-2"}
    assert orphans.StackState("dev", state).together_ids == {"mr-1", "ts-1"}


def test_a_fresh_stack_export_without_resources_holds_nothing():
    state = orphans.parse_state('{"version": 3, "deployment": {"manifest": {}}}', "fresh.json")
    assert state.ids == set() and state.together_ids == set()


@pytest.mark.parametrize(
    ("text", "cause"),
    [
        ("not json", "it is not JSON"),
        ('{"version": 3}', "there is no deployment object"),
        ('{"version": 3, "deployment": {"resources": {}}}', "deployment.resources is not a list"),
    ],
)
def test_a_file_that_is_not_a_stack_export_is_refused_in_one_sentence(tmp_path, text, cause):
    path = tmp_path / "dev.json"
    path.write_text(text)

    with pytest.raises(orphans.OrphanError) as caught:
        orphans.load_state_file(path)

    message = str(caught.value)
    assert message.startswith(f"reading the stack export ({path}): ") and cause in message
    assert message.endswith(".") and "pulumi stack export" in message and "\n" not in message


def test_a_missing_state_file_says_how_to_write_one(tmp_path):
    with pytest.raises(orphans.OrphanError) as caught:
        orphans.load_state_file(tmp_path / "missing.json")
    assert "No such file or directory" in str(caught.value)
    assert "pulumi stack export --stack <name> > FILE" in str(caught.value)


# ------------------------------------------------------------------------------------------ finding


def test_an_object_a_stack_holds_is_not_an_orphan_and_one_no_stack_holds_is(emulator, client):
    held_resource = new_resource(client)
    held_session = new_session(client, held_resource, display_name="declared")
    stray_session = new_session(
        client, held_resource, display_name="by hand"
    )  # a notebook's, on the stack's GPU
    stray_resource = new_resource(client, lora_enabled=False)
    held = orphans.held_ids([export_of((RESOURCE_TYPE, held_resource), (SESSION_TYPE, held_session))])

    found = orphans.find_orphans(client, held, [])

    assert [(o.kind, o.id) for o in found] == [
        ("model resource", stray_resource),
        ("training session", stray_session),
    ]
    resource, session = found
    assert resource.status == "READY" and resource.base_model == MODEL
    assert session.status == "RUNNING" and session.model_resources_id == held_resource
    assert session.resource_is_orphan is False and session.display_name == "by hand"
    assert held_session not in {o.id for o in found}


def test_an_orphan_model_resource_is_priced_like_a_create_of_the_same_shape(emulator, client):
    ident = new_resource(
        client, lora_enabled=False, compute_config={"gpu_type": "B200-SXM", "num_generator_replicas": 2}
    )
    expected = client.estimate_model_resource_cost(
        ModelResourceCreateRequest(
            base_model=MODEL,
            lora_enabled=False,
            compute_config={"gpu_type": "B200-SXM", "num_generator_replicas": 2},
        )
    )
    cheaper = client.estimate_model_resource_cost(ModelResourceCreateRequest(base_model=MODEL))
    assert expected.price_per_hour != cheaper.price_per_hour  # the shape matters, so the test can fail

    (found,) = orphans.find_orphans(client, set(), [])

    assert found.id == ident
    assert (found.price_per_hour, found.currency) == (expected.price_per_hour, expected.currency)
    assert f"${expected.price_per_hour:.2f}/h" in orphans.format_line(found)


def test_when_the_estimate_fails_the_price_is_unknown_and_the_listing_goes_on(emulator, client):
    new_resource(client)
    emulator.control.add_fault(method="POST", path="estimate-cost$", status=400, times=None)

    (found,) = orphans.find_orphans(client, set(), [])

    assert found.price_per_hour is None
    assert "price unknown" in orphans.format_line(found)
    assert "(price unknown)" in orphans.summary([found])


def test_stopped_objects_and_other_users_objects_are_not_orphans(emulator, client):
    stopped = new_resource(client)
    client.stop_model_resource(stopped)
    emulator.control.configure(user_id="user_someone_else")
    theirs = new_resource(client)
    emulator.control.configure(user_id="user_emulator")
    mine = new_resource(client)

    found = orphans.find_orphans(client, set(), [])

    assert [o.id for o in found] == [mine]
    assert status_of(emulator, theirs).endswith("READY")  # active, yet not this user's


def test_a_session_on_an_orphan_resource_says_so_and_the_resource_names_held_sessions(emulator, client):
    stray = new_resource(client)
    stray_session = new_session(client, stray)
    shared = new_resource(client)
    declared = new_session(client, shared)
    held = {declared}  # a stack holds the session but not the resource it runs on (passed in by id)

    found = {o.id: o for o in orphans.find_orphans(client, held, [])}

    assert set(found) == {stray, stray_session, shared}
    assert found[stray_session].resource_is_orphan is True
    assert "(an orphan too)" in orphans.format_line(found[stray_session])
    assert found[shared].held_sessions == [declared]
    assert "--stop will leave it running" in orphans.format_line(found[shared])


def interrupted_entry(client, request, ident: str, owner: str | None) -> Seen:
    """A journal entry as a `pulumi up` killed after its POST answered leaves it: an id, its lease released."""
    return left("model resource", client.base_url, request.to_wire(), owner, ident=ident)


def test_an_interrupted_create_in_the_journal_is_labelled_with_its_time(emulator, client):
    request = ModelResourceCreateRequest(base_model=MODEL)
    ident = client.create_model_resource(request).id
    entry = interrupted_entry(client, request, ident, "organization/team/dev/gpu")
    unlabelled = new_resource(client)

    found = {o.id: o for o in orphans.find_orphans(client, set(), entries())}

    assert found[ident].interrupted_at == entry.modified and found[ident].journal == "interrupted"
    assert found[unlabelled].interrupted_at is None and found[unlabelled].journal is None
    stamp = entry.entry.started_at.astimezone(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    assert orphans.format_line(found[ident]).endswith(
        f"left by an interrupted pulumi up of organization/team/dev/gpu at {stamp}"
    )
    assert "interrupted" not in orphans.format_line(found[unlabelled])


def test_a_version_1_entry_is_named_as_unreadable_and_labels_nothing(emulator, client, tmp_path, capsys):
    ident = new_resource(client)
    started = datetime(2025, 6, 1, 10, 22, tzinfo=timezone.utc)
    journal.directory().mkdir(parents=True, exist_ok=True)
    (journal.directory() / "old.json").write_text(
        json.dumps(
            {
                "kind": "model resource",
                "base_url": client.base_url,
                "body": {"base_model": MODEL},
                "pid": 999999,
                "started_at": started.isoformat(),
                "id": ident,
            }
        )
    )

    (found,) = orphans.find_orphans(client, set(), journal.current().entries())

    assert found.journal is None  # it names no declaration and no format: this release does not read it
    err = capsys.readouterr().err
    assert f"skipped the create journal entry {journal.directory() / 'old.json'}" in err
    assert "a release before 0.2 wrote it" in err


def test_a_finished_create_that_no_state_holds_says_so(emulator, client):
    request = ModelResourceCreateRequest(base_model=MODEL)
    ident = client.create_model_resource(request).id
    entry = left("model resource", client.base_url, request.to_wire(), "organization/team/dev/gpu", ident=ident,
                 state=State.DONE).entry  # fmt: skip

    (found,) = orphans.find_orphans(client, set(), entries())

    stamp = entry.answered_at.astimezone(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    assert found.journal == "done"
    assert found.journal_label == (
        f"its create for organization/team/dev/gpu finished at {stamp}, but no given state holds it (the answer "
        "may not have reached the engine, or the state lost it)"
    )


def test_an_object_a_running_process_is_creating_is_left_out_with_a_note(emulator, client):
    request = ModelResourceCreateRequest(base_model=MODEL)
    ident = client.create_model_resource(request).id
    # This process holds its lease: a create in flight, as another `pulumi up` would.
    entry = begun(
        "model resource", client.base_url, request.to_wire(), "organization/team/dev/gpu", ident=ident
    )
    # The same id recorded for another API, by a process that is gone: it says nothing about this one.
    left("model resource", "https://api.together.ai", request.to_wire(), None, ident=ident)
    try:
        (found,) = orphans.find_orphans(client, set(), entries())
        orphans.decide([found], [], orphans.Rules(min_age=0))
    finally:
        entry.release()

    assert found.id == ident and found.journal == "in_flight"
    assert found.journal_label == (
        f"a running process on this machine ({entry.entry.process.describe()}) is creating it for "
        "organization/team/dev/gpu"
    )
    assert f"pid {entry.entry.process.pid}" in found.journal_label
    assert found.stop is False and found.held_back == "in_flight"
    assert (
        "--stop leaves it running: a running process on this machine is creating it"
        in orphans.format_line(found)
    )


def test_every_orphan_is_listed_whatever_its_age(emulator, client):
    ident = new_resource(client)

    (found,) = orphans.find_orphans(client, set(), [])

    assert found.id == ident and found.age() < 60
    orphans.decide([found], [], orphans.Rules(min_age=600))
    assert found.young and found.stop is False and found.held_back == "too_young"
    orphans.decide(
        [found], [], orphans.Rules(min_age=600), now=datetime.now(timezone.utc) + timedelta(minutes=11)
    )
    assert not found.young and found.stop is True


def test_a_listing_the_api_refuses_is_one_sentence_without_the_key(emulator, client):
    emulator.control.configure(api_key="the-real-key-is-another-one")

    with pytest.raises(orphans.OrphanError) as caught:
        orphans.find_orphans(client, set(), [])

    message = str(caught.value)
    assert message.startswith("listing your active model resources: the API rejected the key (HTTP 401")
    assert message.endswith("Check TOGETHER_API_KEY / --api-key.")
    assert emulator.api_key not in message


# ------------------------------------------------------------------------------------------ stopping


def test_stop_stops_sessions_before_resources_and_leaves_held_objects_running(emulator, client):
    kept = new_resource(client)
    kept_session = new_session(client, kept)
    stray = new_resource(client)
    stray_sessions = [new_session(client, stray), new_session(client, stray)]
    stray_on_kept = new_session(client, kept)
    found = orphans.find_orphans(client, {kept, kept_session}, [])
    emulator.control.clear_requests()

    results = orphans.stop_orphans(client, found, poll_interval=0.01)

    assert all(r.stopped for r in results), [r.message for r in results]
    posts = stop_posts(emulator)
    assert sorted(posts) == sorted(
        f"/v1/rl/{path}/{ident}/stop"
        for path, ident in [
            ("training-sessions", stray_sessions[0]),
            ("training-sessions", stray_sessions[1]),
            ("training-sessions", stray_on_kept),
            ("model-resources", stray),
        ]
    )
    assert posts[-1] == f"/v1/rl/model-resources/{stray}/stop"  # sessions first
    assert "force=false" in next(
        r["query"] for r in emulator.control.requests() if r["path"].endswith(f"{stray}/stop")
    )
    assert status_of(emulator, kept).endswith("READY") and status_of(emulator, kept_session).endswith(
        "RUNNING"
    )
    assert not status_of(emulator, stray).endswith(("READY", "PENDING", "CREATING"))


def test_a_resource_with_a_session_that_is_not_an_orphan_is_reported_and_the_rest_still_stop(
    emulator, client
):
    shared = new_resource(client)
    declared = new_session(client, shared)
    stray = new_resource(client)
    found = orphans.find_orphans(client, {declared}, [])
    assert {o.id for o in found} == {shared, stray}

    results = {r.orphan.id: r for r in orphans.stop_orphans(client, found, poll_interval=0.01)}

    assert results[stray].stopped
    refused = results[shared]
    assert not refused.stopped
    assert refused.message.startswith(
        f"stopping model resource ({shared}): the API refused to stop it because"
    )
    assert declared in refused.message and refused.message.endswith("it was left running.")
    assert status_of(emulator, shared).endswith("READY") and status_of(emulator, declared).endswith("RUNNING")


def test_a_resource_waits_for_its_stopping_orphan_sessions_before_it_is_stopped(emulator, client):
    emulator.control.configure(timings={"session_stopping": 30.0})
    stray = new_resource(client)
    session = new_session(client, stray)
    found = orphans.find_orphans(client, set(), [])
    progress = io.StringIO()
    slept: list[float] = []

    def sleep(seconds: float) -> None:  # emulator time instead of wall time: the test stays fast
        slept.append(seconds)
        emulator.control.advance(10)

    results = orphans.stop_orphans(client, found, poll_interval=0.01, sleep=sleep, out=progress)

    assert [r.stopped for r in results] == [True, True], [r.message for r in results]
    assert slept, "the resource stop should have waited for the session to end"
    assert "waiting for 1 stopping training session(s) to end" in progress.getvalue()
    assert status_of(emulator, session).endswith("STOPPED")
    assert status_of(emulator, stray).endswith(("STOPPING", "STOPPED"))
    resource_stops = [p for p in stop_posts(emulator) if p.endswith(f"model-resources/{stray}/stop")]
    assert len(resource_stops) == 2  # refused while the session was stopping, then accepted


def test_a_stop_that_fails_is_reported_in_one_sentence(emulator, client):
    stray = new_resource(client)
    found = orphans.find_orphans(client, set(), [])
    emulator.control.add_fault(method="POST", path=r"/stop$", status=403, times=None, message="not yours")

    (result,) = orphans.stop_orphans(client, found, poll_interval=0.01)

    assert not result.stopped
    assert result.message == (
        f"stopping model resource ({stray}): the key may not do this (HTTP 403: not yours). "
        "Use a key that may list and stop the project's model resources and training sessions."
    )


# ------------------------------------------------------------------------------------------ output


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (0, "<1 min"),
        (59, "<1 min"),
        (720, "12 min"),
        (3600, "1 h"),
        (11100, "3 h 5 min"),
        (86400 * 2 + 4 * 3600, "2 d 4 h"),
    ],
)
def test_ages_are_short(seconds, text):
    assert orphans.format_age(seconds) == text


def _orphan(kind: str, ident: str, price: float | None = None) -> orphans.Orphan:
    return orphans.Orphan(
        kind=kind,
        id=ident,
        status="READY" if kind == "model resource" else "RUNNING",
        created_at=datetime.now(timezone.utc) - timedelta(minutes=12),
        price_per_hour=price,
        currency="USD" if price is not None else None,
        model_resources_id="mr-1" if kind == "training session" else None,
    )


def test_the_summary_counts_kinds_prices_and_what_was_done():
    found = [_orphan("model resource", "mr-1", 12.4), _orphan("training session", "ts-1")]

    assert orphans.summary(found) == (
        "2 orphans: 1 model resource (~$12.40/h), 1 training session. Dry run: nothing was stopped; "
        "run again with --stop to stop them."
    )
    stopped = [orphans.StopResult(o, True, "stopped") for o in found]
    assert orphans.summary(found, stopped).endswith("Stopped all 2.")
    partly = [orphans.StopResult(found[0], False, "refused"), orphans.StopResult(found[1], True, "stopped")]
    assert orphans.summary(found, partly).endswith(
        "Stopped 1 (1 training session); 1 could not be stopped (see the errors above)."
    )
    mixed = [
        _orphan("model resource", "a", 2.5),
        _orphan("model resource", "b"),
        _orphan("model resource", "c", 1),
    ]
    assert orphans.summary(mixed).startswith("3 orphans: 3 model resources (~$3.50/h, 1 of unknown price).")
    assert orphans.summary([found[1]]).endswith("run again with --stop to stop it.")
    assert orphans.summary([], held=3, states=1) == (
        "No orphans: every active model resource and training session of this key's user is held by the stack "
        "states read (3 held ids in 1 state)."
    )


def test_an_orphan_session_whose_stop_failed_keeps_its_resource_running_and_says_why(emulator, client):
    stray = new_resource(client)
    session = new_session(client, stray)
    found = orphans.find_orphans(client, set(), [])
    emulator.control.add_fault(method="POST", path=r"training-sessions/.*/stop$", status=403, times=None)

    results = {r.orphan.id: r for r in orphans.stop_orphans(client, found, poll_interval=0.01)}

    assert not results[session].stopped and not results[stray].stopped
    assert "orphan training sessions whose stop failed are still attached" in results[stray].message
    assert status_of(emulator, stray).endswith("READY")


def test_a_refused_stop_that_cannot_be_looked_up_counts_as_failed(emulator, client):
    stray = new_resource(client)
    found = orphans.find_orphans(client, set(), [])
    emulator.control.add_fault(method="POST", path=r"/stop$", status=409, times=None, message="busy")
    emulator.control.add_fault(method="GET", path=f"model-resources/{stray}$", status=403, times=None)

    (result,) = orphans.stop_orphans(client, found, poll_interval=0.01)

    assert not result.stopped
    assert result.message.startswith(
        f"stopping model resource ({stray}): the API refused it in the object's current state (HTTP 409: busy)"
    )


# ------------------------------------------------------------------------------------------ states and the CLI


def fake_pulumi(monkeypatch, returncode: int, stdout: str, stderr: str = ""):
    """A `pulumi` on PATH whose answer is given: what `stack_config` and `list_stacks` do with it."""
    calls: list[list[str]] = []
    monkeypatch.setattr("pulumi_together_rl.orphans.states.shutil.which", lambda name: "/opt/bin/pulumi")

    def run(command, **kwargs):
        calls.append(command[1:])
        return subprocess.CompletedProcess(command, returncode, stdout, stderr)

    return run, calls


def test_stack_config_takes_its_keys_and_nothing_else(monkeypatch):
    # The shape `pulumi config --json --show-secrets` answers (Pulumi CLI v3.274.1).
    answer = {
        "together:apiKey": {"value": "tk-dev-key", "secret": True},
        "together:baseUrl": {"value": "http://127.0.0.1:9/", "secret": False},
        "together-rl:journalUrl": {"value": "s3://team-journal/dev", "secret": False},
        "db:password": {"value": "hunter2", "secret": True},
    }
    run, calls = fake_pulumi(monkeypatch, 0, json.dumps(answer))

    found = orphans.stack_config("organization/team/dev", cwd="/p", run=run)

    assert found == {
        "together:apiKey": "tk-dev-key",
        "together:baseUrl": "http://127.0.0.1:9/",
        "together-rl:journalUrl": "s3://team-journal/dev",
    }
    assert calls == [
        ["config", "--json", "--show-secrets", "--stack", "organization/team/dev", "--non-interactive"]
    ]


@pytest.mark.parametrize(
    ("returncode", "stdout", "stderr", "cause"),
    [
        (
            1,
            '{"together:apiKey": {"value": "tk-dev-key", "secret": true}}',
            "error: incorrect passphrase",
            "incorrect passphrase",
        ),
        (1, '{"together:apiKey": {"value": "tk-dev-key", "secret": true}}', "", "exit status 1"),
        (0, '{"together:apiKey": {"value": "tk-dev-key", "secret": true', "", "did not answer a JSON object"),
        (0, '{"together:apiKey": {"secret": true}}', "", "did not show the secret together:apiKey"),
    ],
)
def test_a_config_that_cannot_be_read_is_one_sentence_without_its_secrets(
    monkeypatch, returncode, stdout, stderr, cause
):
    run, _ = fake_pulumi(monkeypatch, returncode, stdout, stderr)

    with pytest.raises(orphans.OrphanError) as caught:
        orphans.stack_config("dev", run=run)

    message = str(caught.value)
    assert message.startswith("reading the config of stack (dev): ") and cause in message
    assert "tk-dev-key" not in message and "\n" not in message


def test_list_stacks_asks_for_every_project_by_fully_qualified_name(monkeypatch):
    listed = [
        {
            "name": "organization/team/dev",
            "current": False,
            "lastUpdate": "2026-01-01T00:00:00Z",
            "resourceCount": 4,
        },
        {"name": "organization/other/prod", "current": False, "updateInProgress": True, "resourceCount": 2},
    ]
    run, calls = fake_pulumi(monkeypatch, 0, json.dumps(listed))
    notes: list[str] = []

    assert orphans.list_stacks(run=run, note=notes.append) == [
        "organization/team/dev",
        "organization/other/prod",
    ]
    assert calls == [["stack", "ls", "--all", "--json", "--fully-qualify-stack-names", "--non-interactive"]]
    assert len(notes) == 1 and "organization/other/prod has an update in progress" in notes[0]


def test_a_file_state_names_its_stack_and_the_commands_that_clear_its_pending_creates():
    state = orphans.StackState("dev.json", export_of((RESOURCE_TYPE, "mr-1")))
    listed = orphans.StackState(
        "stack organization/team/prod",
        export_of(stack="prod"),
        name="organization/team/prod",
        folder="/work/my project",
    )

    assert state.title == "dev.json (stack dev of project team)"
    owner = ours.parse_owner
    assert state.holds_declarations_of(owner("organization/team/dev/gpu"), None)
    assert not state.holds_declarations_of(owner("organization/team/prod/gpu"), None)
    assert state.holds_declarations_of(owner("-/team/dev/gpu"), "b1")  # a file names no backend
    assert state.clear_commands() == (
        "pulumi cancel --yes --stack dev",
        "pulumi refresh --clear-pending-creates --yes --stack dev",
        " in the folder of project team",
    )
    assert listed.holds_declarations_of(owner("organization/team/prod/gpu"), None)
    assert listed.holds_declarations_of(
        owner("-/team/prod/gpu"), None
    )  # the plugin face names no organization
    assert not listed.holds_declarations_of(owner("acme/team/prod/gpu"), None)
    in_backend = dataclasses.replace(listed, backend="b1")
    assert in_backend.holds_declarations_of(owner("organization/team/prod/gpu"), "b1")
    assert not in_backend.holds_declarations_of(owner("organization/team/prod/gpu"), "b2")  # a namesake
    assert listed.clear_commands() == (
        "pulumi cancel --yes --stack organization/team/prod",
        "pulumi refresh --clear-pending-creates --yes --stack organization/team/prod --cwd '/work/my project'",
        "",
    )


# ------------------------------------------------------------------------------------------ the command


def later(hours: float = 3) -> datetime:
    """Three hours from now: every object made by the test is past the default --min-age (90 min)."""
    return datetime.now(timezone.utc) + timedelta(hours=hours)


class Terminal(io.StringIO):
    """Standard input on a terminal that answers ``answer``. When the command reads it, it notes what the user
    had seen by then and which stops the emulator had received."""

    def __init__(self, answer: str, screen: io.StringIO, emulator) -> None:
        super().__init__(answer)
        self.screen, self.emulator = screen, emulator
        self.seen: str | None = None
        self.stops_before_answer: list[str] | None = None

    def isatty(self) -> bool:
        return True

    def readline(self, *args) -> str:
        self.seen = self.screen.getvalue()
        self.stops_before_answer = stop_posts(self.emulator)
        return super().readline(*args)


class Unread(io.StringIO):
    """A terminal nobody may read from (``--yes`` must not ask)."""

    def isatty(self) -> bool:
        return True

    def readline(self, *args) -> str:
        raise AssertionError("the command read standard input")


def command(emulator, *argv: str, answer: str | None = None, stdin=None, now=None):
    """`orphans ARGV` in this process, stdout and stderr in one stream as a terminal shows them:
    (exit status, what was written, the standard input it had)."""
    screen = io.StringIO()
    if stdin is None:
        stdin = Terminal(answer, screen, emulator) if answer is not None else io.StringIO("y\n")
    args = build_parser().parse_args(["orphans", *argv])
    code = orphans.run(args, stdout=screen, stderr=screen, stdin=stdin, now=now)
    return code, screen.getvalue(), stdin


def state_file(tmp_path, name: str, *held: tuple[str, str], stack: str = "dev", pending=()) -> str:
    document = export_of(*held, stack=stack)
    document["deployment"]["pending_operations"] = [
        {
            "type": "creating",
            "resource": {
                "urn": f"urn:pulumi:{stack}::team::{kind}::{resource}",
                "custom": True,
                "type": kind,
            },
        }
        for kind, resource in pending
    ]
    path = tmp_path / name
    path.write_text(json.dumps(document))
    return str(path)


def listing_lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith(("model resource  ", "training session  "))]


def active_ids(emulator) -> set[str]:
    state = emulator.control.state()
    return {
        o["id"]
        for o in state["model_resources"] + state["training_sessions"]
        if o["status"].endswith(("PENDING", "CREATING", "READY", "RUNNING"))
    }


@pytest.fixture
def team(emulator, client, tmp_path):
    """dev.json holds one resource; a stray resource with a session on it, and a stray session on dev's one."""
    kept = new_resource(client)
    stray = new_resource(client)
    stray_session = new_session(client, stray)
    dev = state_file(tmp_path, "dev.json", (RESOURCE_TYPE, kept))
    price = client.estimate_model_resource_cost(ModelResourceCreateRequest(base_model=MODEL)).price_per_hour
    emulator.control.clear_requests()
    return {"kept": kept, "stray": stray, "stray_session": stray_session, "dev": dev, "price": price}


def test_stop_lists_everything_before_it_asks_and_a_no_stops_nothing(emulator, team):
    code, text, terminal = command(emulator, "--state", team["dev"], "--stop", answer="n\n", now=later())

    assert terminal.seen is not None, "--stop never asked"
    assert terminal.stops_before_answer == []  # nothing was stopped before the answer came
    shown = listing_lines(terminal.seen)
    assert [line.split()[2] for line in shown] == [team["stray"], team["stray_session"]]
    assert all("--stop stops it: no state read holds it" in line for line in shown)
    assert terminal.seen.endswith(f"Stop these 2 objects (~${team['price']:.2f}/h)? [y/N] ")
    assert code == 0 and text.rstrip().endswith("Nothing was stopped: the stop was not confirmed.")
    assert stop_posts(emulator) == []
    assert active_ids(emulator) == {team["kept"], team["stray"], team["stray_session"]}


@pytest.mark.parametrize("answer", ["\n", "", "N\n", "no\n", "yy\n", "ok\n"])
def test_any_answer_but_y_or_yes_stops_nothing(emulator, team, answer):
    code, text, terminal = command(emulator, "--state", team["dev"], "--stop", answer=answer, now=later())

    assert terminal.seen is not None and code == 0
    assert stop_posts(emulator) == [] and "Nothing was stopped" in text


@pytest.mark.parametrize("answer", ["y\n", " Yes \n"])
def test_y_or_yes_stops_exactly_the_listed_orphans_sessions_first(emulator, team, answer):
    code, text, _ = command(emulator, "--state", team["dev"], "--stop", answer=answer, now=later())

    assert code == 0, text
    assert stop_posts(emulator) == [
        f"/v1/rl/training-sessions/{team['stray_session']}/stop",
        f"/v1/rl/model-resources/{team['stray']}/stop",
    ]
    assert active_ids(emulator) == {team["kept"]}
    assert text.rstrip().endswith("Stopped all 2.")


def test_without_a_terminal_stop_needs_yes_and_stops_nothing(emulator, team):
    code, text, _ = command(emulator, "--state", team["dev"], "--stop", stdin=io.StringIO("y\n"), now=later())

    assert code == orphans.EXIT_REFUSED == 4
    assert text.rstrip().splitlines()[-1] == (
        "error: stopping orphans: standard input is not a terminal, so there is nobody to confirm the stop. Run "
        "it in a terminal, or pass --yes to stop the 2 objects marked `--stop stops it` above without asking "
        "(nothing was stopped)."
    )
    assert len(listing_lines(text)) == 2 and stop_posts(emulator) == []


def test_yes_stops_without_asking(emulator, team):
    code, text, _ = command(emulator, "--state", team["dev"], "--stop", "--yes", stdin=Unread(), now=later())

    assert code == 0, text
    assert f"--yes: stopping these 2 objects (~${team['price']:.2f}/h) without asking." in text
    assert active_ids(emulator) == {team["kept"]}
    lines = text.splitlines()
    first_stop = next(i for i, line in enumerate(lines) if line.startswith("stopped "))
    assert all(lines.index(line) < first_stop for line in listing_lines(text))


def test_an_empty_export_with_stop_is_refused_and_the_listing_says_everything_looks_orphaned(
    emulator, team, tmp_path
):
    empty = tmp_path / "fresh.json"
    empty.write_text('{"version": 3, "deployment": {"manifest": {"version": "v3.274.1"}}}')

    code, text, _ = command(emulator, "--state", str(empty), "--stop", "--yes", now=later())

    assert code == orphans.EXIT_REFUSED
    warning = (
        "warning: the stack state read holds no Together model resource or training session, so every active "
        "object of the key's user looks orphaned below; --stop refuses to stop them unless you pass "
        "--even-if-no-stack-holds-any."
    )
    lines = text.splitlines()
    assert lines.index(warning) < lines.index(listing_lines(text)[0])
    assert len(listing_lines(text)) == 3
    assert lines[-1].startswith(
        "error: stopping orphans: no stack state read holds any Together model resource or training session"
    )
    assert stop_posts(emulator) == [] and len(active_ids(emulator)) == 3

    code, text, _ = command(
        emulator, "--state", str(empty), "--stop", "--yes", "--even-if-no-stack-holds-any", now=later()
    )
    assert code == 0, text
    assert active_ids(emulator) == set()


def test_none_still_stops_on_purpose(emulator, team):
    code, text, _ = command(emulator, "--none", "--stop", "--yes", now=later())

    assert code == 0, text
    assert "note: --none: no stack state was read, on purpose" in text
    assert active_ids(emulator) == set()


def test_given_states_warn_once_before_the_listing_that_other_stacks_look_orphaned(emulator, team):
    code, text, _ = command(emulator, "--state", team["dev"], now=later())

    assert code == 0
    lines = text.splitlines()
    assert lines[0] == f"checked 1 stack: {team['dev']}"
    warnings = [i for i, line in enumerate(lines) if line.startswith("warning: only the given stack states")]
    assert len(warnings) == 1 and warnings[0] < lines.index(listing_lines(text)[0])


def test_young_orphans_are_listed_with_their_age_and_left_running(emulator, client, tmp_path):
    kept = client.create_model_resource(
        ModelResourceCreateRequest(base_model=MODEL, inactive_timeout=86400)
    ).id
    old = client.create_model_resource(
        ModelResourceCreateRequest(base_model=MODEL, inactive_timeout=86400)
    ).id
    emulator.control.advance(3 * 3600)  # three hours pass on the API's clock
    young = new_resource(client)
    dev = state_file(tmp_path, "dev.json", (RESOURCE_TYPE, kept))
    now = emulator.control.now()

    code, text, _ = command(emulator, "--state", dev, "--stop", "--yes", now=now)

    assert code == 0, text
    old_line, young_line = listing_lines(text)
    assert old_line.split()[2] == old and "3 h" in old_line and "--stop stops it" in old_line
    assert young_line.split()[2] == young and "<1 min" in young_line
    assert young_line.endswith(
        "--stop leaves it running: it is <1 min old, younger than --min-age (1 h 30 min): a `pulumi up` "
        "elsewhere may be creating it; --min-age 0 stops it anyway"
    )
    assert stop_posts(emulator) == [f"/v1/rl/model-resources/{old}/stop"]
    price = client.estimate_model_resource_cost(ModelResourceCreateRequest(base_model=MODEL)).price_per_hour
    assert text.rstrip().splitlines()[-1] == (
        f"2 orphans: 2 model resources (~${2 * price:.2f}/h). Stopped 1 (1 model resource (~${price:.2f}/h)); 1 "
        "left running (see each line)."
    )

    code, text, _ = command(emulator, "--state", dev, "--stop", "--yes", "--min-age", "0", now=now)
    assert code == 0, text
    assert active_ids(emulator) == {kept}


def test_fail_if_any_counts_only_orphans_old_enough_to_stop(emulator, team):
    assert command(emulator, "--state", team["dev"], "--fail-if-any")[0] == 0  # all younger than 90 min
    assert command(emulator, "--state", team["dev"], "--fail-if-any", now=later())[0] == 3
    assert stop_posts(emulator) == []


def test_an_interrupted_creates_object_is_held_for_its_next_up_and_stopped_once_none_takes_it_over(
    emulator, client, tmp_path
):
    """An unfinished entry records the id: the next `pulumi up` of its declaration takes the object over (on any
    machine, after `recover`), so it is never stopped while one may. A day on, no create takes it over any more:
    it is stopped, however young it looked to --min-age."""
    kept = new_resource(client)
    request = ModelResourceCreateRequest(base_model=MODEL)
    left = client.create_model_resource(request).id
    interrupted_entry(client, request, left, "organization/team/dev/gpu")
    young = new_resource(client)
    dev = state_file(tmp_path, "dev.json", (RESOURCE_TYPE, kept))

    code, text, _ = command(emulator, "--state", dev, "--stop", "--yes", "--min-age", "0")
    assert code == 0, text
    lines = {line.split()[2]: line for line in listing_lines(text)}
    assert "the next `pulumi up` of that stack takes it over by it" in lines[left]
    assert stop_posts(emulator) == [f"/v1/rl/model-resources/{young}/stop"]

    code, text, _ = command(emulator, "--state", dev, "--stop", "--yes", now=later(hours=25))
    assert code == 0, text
    lines = {line.split()[2]: line for line in listing_lines(text)}
    assert lines[left].endswith(
        "--stop stops it: no state read holds it, and the journal says an interrupted pulumi up left it"
    )
    assert stop_posts(emulator)[-1] == f"/v1/rl/model-resources/{left}/stop"


def test_an_orphan_journalled_for_a_stack_that_was_not_read_is_left_running(emulator, client, tmp_path):
    kept = new_resource(client)
    request = ModelResourceCreateRequest(base_model=MODEL)
    prods = client.create_model_resource(request).id
    # prod's `pulumi up` on this machine got it: prod's state holds it
    left(
        "model resource",
        client.base_url,
        request.to_wire(),
        "organization/team/prod/gpu",
        ident=prods,
        state=State.DONE,
    )
    dev = state_file(tmp_path, "dev.json", (RESOURCE_TYPE, kept))

    code, text, _ = command(emulator, "--state", dev, "--stop", "--yes", now=later())

    assert code == 0, text
    (line,) = listing_lines(text)
    assert "its create for organization/team/prod/gpu finished at" in line
    assert line.endswith(
        "--stop leaves it running: its journal entry names stack organization/team/prod in backend "
        "https://api.pulumi.com, which was not read and may hold it; read that stack too, or pass "
        "--ignore-journal-owner if it is gone"
    )
    assert stop_posts(emulator) == []

    # prod's state read too, and it does not hold it: the journal's owner no longer protects it.
    prod = state_file(tmp_path, "prod.json", (RESOURCE_TYPE, "another-id"), stack="prod")
    code, text, _ = command(emulator, "--state", dev, "--state", prod, "--stop", "--yes", now=later())
    assert code == 0, text
    assert stop_posts(emulator) == [f"/v1/rl/model-resources/{prods}/stop"]


def test_ignore_journal_owner_stops_it_anyway(emulator, client, tmp_path):
    kept = new_resource(client)
    request = ModelResourceCreateRequest(base_model=MODEL)
    gone = client.create_model_resource(request).id
    left(
        "model resource",
        client.base_url,
        request.to_wire(),
        "organization/team/qa/gpu",
        ident=gone,
        state=State.DONE,
    )
    dev = state_file(tmp_path, "dev.json", (RESOURCE_TYPE, kept))

    code, text, _ = command(
        emulator, "--state", dev, "--stop", "--yes", "--ignore-journal-owner", now=later()
    )

    assert code == 0, text
    assert stop_posts(emulator) == [f"/v1/rl/model-resources/{gone}/stop"]


def test_a_pending_create_protects_objects_of_its_kind_and_is_reported_with_its_commands(
    emulator, client, tmp_path
):
    kept = new_resource(client)
    maybe_pending = new_resource(client)
    stray_session = new_session(client, kept)  # a session nobody declared, on dev's GPU
    dev = state_file(tmp_path, "dev.json", (RESOURCE_TYPE, kept), pending=[(RESOURCE_TYPE, "sweep-gpu")])

    code, text, _ = command(emulator, "--state", dev, "--stop", "--yes", now=later())

    assert code == 0, text
    lines = text.splitlines()
    warning = next(line for line in lines if "pending operation" in line)
    assert warning == (
        f"warning: {dev} (stack dev of project team) has 1 pending operation (creating model resource "
        "sweep-gpu): an update of it is running now, or one was killed before its state recorded the outcome, so "
        "--stop leaves objects of those kinds running. Once no update of it is running, clear them: `pulumi "
        "cancel --yes --stack dev` (removes a killed update's lock), then `pulumi refresh --clear-pending-creates "
        "--yes --stack dev` in the folder of project team."
    )
    assert lines.index(warning) < lines.index(listing_lines(text)[0])
    found = {line.split()[2]: line for line in listing_lines(text)}
    assert found[maybe_pending].endswith(
        f"--stop leaves it running: it may be what a pending create is making: the pending create of sweep-gpu in "
        f"{dev} (stack dev of project team) (cleared by `pulumi refresh --clear-pending-creates --yes --stack dev` "
        "in the folder of project team); --ignore-pending-creates stops it anyway"
    )
    # A session is another kind: the pending create of a model resource cannot be it.
    assert stop_posts(emulator) == [f"/v1/rl/training-sessions/{stray_session}/stop"]

    code, text, _ = command(
        emulator, "--state", dev, "--stop", "--yes", "--ignore-pending-creates", now=later()
    )
    assert code == 0, text
    assert stop_posts(emulator)[-1] == f"/v1/rl/model-resources/{maybe_pending}/stop"


def test_a_create_in_flight_is_never_stopped(emulator, client, tmp_path):
    kept = new_resource(client)
    request = ModelResourceCreateRequest(base_model=MODEL)
    creating = client.create_model_resource(request).id
    # Held by this process, as a running `pulumi up` holds its entry.
    entry = begun(
        "model resource", client.base_url, request.to_wire(), "organization/team/dev/gpu", ident=creating
    )
    dev = state_file(tmp_path, "dev.json", (RESOURCE_TYPE, kept))
    try:
        code, text, _ = command(
            emulator,
            "--state",
            dev,
            "--stop",
            "--yes",
            "--min-age",
            "0",
            "--ignore-journal-owner",
            now=later(),
        )
    finally:
        entry.release()

    assert code == 0, text
    (line,) = listing_lines(text)
    assert f"a running process on this machine ({entry.entry.process.describe()}) is creating it for " in line
    assert stop_posts(emulator) == []
    assert (
        text.rstrip()
        .splitlines()[-1]
        .endswith("Nothing was stopped: --stop leaves it running (see each line).")
    )


def test_json_says_why_each_is_or_is_not_stopped(emulator, client, tmp_path):
    kept = client.create_model_resource(
        ModelResourceCreateRequest(base_model=MODEL, inactive_timeout=86400)
    ).id
    old = client.create_model_resource(
        ModelResourceCreateRequest(base_model=MODEL, inactive_timeout=86400)
    ).id
    emulator.control.advance(3 * 3600)
    young = new_resource(client)
    dev = state_file(tmp_path, "dev.json", (RESOURCE_TYPE, kept))
    out, err = io.StringIO(), io.StringIO()
    args = build_parser().parse_args(["orphans", "--state", dev, "--json"])

    code = orphans.run(args, stdout=out, stderr=err, stdin=io.StringIO(""), now=emulator.control.now())

    assert code == 0
    listed = {o["id"]: o for o in json.loads(out.getvalue())}
    assert set(listed) == {old, young}
    assert listed[old]["stop_eligible"] is True and listed[old]["held_back"] is None
    assert listed[old]["why"] == "no state read holds it, and it is older than --min-age (1 h 30 min)"
    assert listed[young]["stop_eligible"] is False and listed[young]["held_back"] == "too_young"
    assert "--min-age 0 stops it anyway" in listed[young]["why"]
    assert all(o["api"] == emulator.base_url and o["stopped"] is False for o in listed.values())
    assert all(o["journal"] is None and o["possible_pending_create_of"] == [] for o in listed.values())
    assert err.getvalue().startswith(f"checked 1 stack: {dev}\n")  # the report goes to stderr with --json


def test_the_api_line_names_where_the_key_came_from_never_the_key(emulator, team, monkeypatch):
    code, text, _ = command(emulator, "--state", team["dev"])
    assert code == 0
    assert (
        f"checked {emulator.base_url} (base URL from TOGETHER_BASE_URL) with the key from TOGETHER_API_KEY for "
        f"1 stack: {team['dev']}"
    ) in text.splitlines()

    monkeypatch.delenv("TOGETHER_API_KEY")
    code, text, _ = command(emulator, "--state", team["dev"], "--api-key", emulator.api_key)
    assert code == 0
    assert "with the key from --api-key for 1 stack" in text
    assert emulator.api_key not in text


def test_a_short_key_is_masked_as_a_word_never_inside_one(emulator, team, monkeypatch):
    """The finder scrubs every key it read from what it writes: a one-letter key must not turn ``checked`` into
    ``chec***ed``."""
    emulator.control.configure(api_key="k")
    monkeypatch.delenv("TOGETHER_API_KEY")

    code, text, _ = command(emulator, "--state", team["dev"], "--api-key", "k")

    assert code == 0
    assert "checked 1 stack" in text and "with the key from --api-key" in text
    assert "***" not in text


# ------------------------------------------------------------------------------- journals of every stack


def project_in(folder, backend_url: str) -> str:
    """A Pulumi project folder whose Pulumi.yaml names ``backend_url``: where `pulumi` (and the provider) run."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "Pulumi.yaml").write_text(f"name: team\nruntime: python\nbackend:\n  url: {backend_url}\n")
    return str(folder)


def test_an_object_made_in_the_window_of_an_interrupted_create_that_got_no_id_is_never_stopped(
    emulator, client, bucket, tmp_path, monkeypatch
):
    """A runner whose POST got no answer before it was thrown away: its entry in the bucket beside the state has
    sends and no id, and its lease has run out. What the API made in that window may be its object."""
    monkeypatch.setenv("PULUMI_BACKEND_URL", bucket.url)
    kept = new_resource(client)
    before = new_resource(client)  # in the create's snapshot: it cannot be what that POST made
    request = ModelResourceCreateRequest(base_model=MODEL)
    # The runner is gone (nobody renews its lease); its POST's answer never reached it.
    entry = left("model resource", client.base_url, request.to_wire(), "organization/team/ci/gpu",
                 snapshot={kept, before}, clock_offset=client.clock_offset, url=location.sibling(bucket.url))  # fmt: skip
    made = client.create_model_resource(request).id
    dev = state_file(tmp_path, "ci.json", (RESOURCE_TYPE, kept), stack="ci")

    code, text, _ = command(emulator, "--state", dev, "--stop", "--yes", "--min-age", "0")

    assert code == 0, text
    lines = {line.split()[2]: line for line in listing_lines(text)}
    assert (
        "made while an interrupted pulumi up of organization/team/ci/gpu waited for the answer" in lines[made]
    )
    assert f"(entry {entry.name})" in lines[made]
    assert (
        "--stop leaves it running: an interrupted create of organization/team/ci/gpu got no answer"
        in (lines[made])
    )
    assert lines[before].endswith("--stop stops it: no state read holds it (--min-age 0)")
    assert stop_posts(emulator) == [f"/v1/rl/model-resources/{before}/stop"]
    assert f"read the create journal in {location.sibling(bucket.url)}" in text


def test_a_create_on_this_machine_is_seen_while_the_backend_is_a_bucket(
    emulator, client, bucket, tmp_path, monkeypatch
):
    """A laptop's stack with a file backend creates (its journal: this machine's folder) while the command
    runs where the backend is the team's bucket: both journals are read."""
    kept = new_resource(client)
    request = ModelResourceCreateRequest(base_model=MODEL)
    creating = client.create_model_resource(request).id
    # Held by this process, as a running `pulumi up` holds its entry.
    entry = begun(
        "model resource", client.base_url, request.to_wire(), "organization/team/dev/gpu", ident=creating
    )
    assert not entry.journal.shared
    monkeypatch.setenv("PULUMI_BACKEND_URL", bucket.url)
    dev = state_file(tmp_path, "dev.json", (RESOURCE_TYPE, kept))
    try:
        code, text, _ = command(
            emulator, "--state", dev, "--stop", "--yes", "--min-age", "0", "--ignore-journal-owner"
        )
    finally:
        entry.release()

    assert code == 0, text
    (line,) = listing_lines(text)
    assert f"a running process on this machine ({entry.entry.process.describe()}) is creating it for " in line
    assert stop_posts(emulator) == []


def test_a_live_lease_in_the_journal_beside_the_cwd_projects_bucket_holds_its_object(
    emulator, client, bucket, tmp_path
):
    """A CI runner is creating in the project whose Pulumi.yaml names the bucket; the command runs elsewhere with
    --cwd: the journal beside that backend's state is read, and the runner's live lease holds its object."""
    project = project_in(tmp_path / "team", bucket.url)
    kept = new_resource(client)
    request = ModelResourceCreateRequest(base_model=MODEL)
    creating = client.create_model_resource(request).id
    runner = begun(  # its lease is renewed while it runs
        "model resource",
        client.base_url,
        request.to_wire(),
        "organization/team/ci/gpu",
        ident=creating,
        stack_backend=backend.locate(project),
    )
    assert runner.journal.url == location.sibling(bucket.url)
    ci = state_file(tmp_path, "ci.json", (RESOURCE_TYPE, kept), stack="ci")
    try:
        code, text, _ = command(
            emulator,
            "--state",
            ci,
            "--cwd",
            project,
            "--stop",
            "--yes",
            "--min-age",
            "0",
            "--ignore-journal-owner",
        )
    finally:
        runner.release()

    assert code == 0, text
    (line,) = listing_lines(text)
    assert f"a running create ({runner.entry.process.describe()}, its lease in s3://{bucket.name}/" in line
    assert "--stop leaves it running: a running create (its lease in s3://" in line
    assert stop_posts(emulator) == []


def test_a_shared_journal_that_cannot_be_read_stops_the_command_before_anything_is_stopped(
    emulator, client, tmp_path, monkeypatch
):
    kept = new_resource(client)
    new_resource(client)
    monkeypatch.setenv("TOGETHER_RL_JOURNAL_URL", "s3://nowhere/team?endpoint=127.0.0.1:9&disableSSL=true")
    dev = state_file(tmp_path, "dev.json", (RESOURCE_TYPE, kept))

    code, text, _ = command(emulator, "--state", dev, "--stop", "--yes", "--min-age", "0")

    assert code == 1, text
    (error,) = [line for line in text.splitlines() if line.startswith("error:")]
    assert error.startswith(
        "error: finding orphans: the create journal at s3://nowhere/team?endpoint=127.0.0.1:9&disableSSL=true cannot be "
        "used: "
    )
    assert "Nothing was stopped." in error, error
    assert stop_posts(emulator) == []


def test_the_journals_read_are_this_machines_the_variables_each_stacks_setting_and_the_buckets(
    bucket, tmp_path, monkeypatch
):
    from pulumi_together_rl.orphans import sources

    monkeypatch.setenv("TOGETHER_RL_JOURNAL_URL", "file:///srv/journal")
    project = project_in(tmp_path / "team", bucket.url)
    dev = orphans.parse_state(json.dumps(export_of()), "stack dev", name="organization/team/dev")
    prod = orphans.parse_state(json.dumps(export_of()), "stack prod", name="organization/team/prod")
    configs = [(dev, {"together:journalUrl": "s3://dev-journal/x"}), (prod, {"together-rl:apiKey": "tk"})]

    read = sources._journals(project, configs)

    assert [(j.url, j.sources) for j in read] == [
        (None, ["creates of this machine"]),
        ("file:///srv/journal", ["TOGETHER_RL_JOURNAL_URL"]),
        ("s3://dev-journal/x", ["stack organization/team/dev's together:journalUrl"]),
        (
            location.sibling(bucket.url),
            [f"beside the stacks' state in {location.printable(backend.locate(project).url)}"],
        ),
    ]
