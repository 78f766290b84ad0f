"""The orphan finder's logic (pulumi_together_rl.orphans) against the real emulator, without subprocesses.

What a stack holds comes from `pulumi stack export` documents written here in the CLI's shape; the objects are
made through the client, as `pulumi up` (or a notebook) would make them. The command line itself is tested in
tests/e2e/test_orphans_cli.py.
"""

from __future__ import annotations

import io
import subprocess
import sys
from datetime import datetime, timedelta, timezone

import pytest

from pulumi_together_rl import journal, orphans
from pulumi_together_rl.client import TogetherRL
from pulumi_together_rl.client.models import ModelResourceCreateRequest, TrainingSessionCreateRequest

MODEL = "Qwen/Qwen3.5-4B"
RESOURCE_TYPE = "pulumi-python:dynamic/together:ModelResource"
SESSION_TYPE = "pulumi-python:dynamic/together:TrainingSession"


def export_of(*held: tuple[str, str]) -> dict:
    """A `pulumi stack export` document whose stack holds these (type, id) resources."""
    resources = [
        {
            "urn": "urn:pulumi:dev::team::pulumi:pulumi:Stack::team-dev",
            "custom": False,
            "type": "pulumi:pulumi:Stack",
        },
        {
            "urn": "urn:pulumi:dev::team::pulumi:providers:pulumi-python::default",
            "custom": True,
            "id": "5e1a9c6e-provider-id",
            "type": "pulumi:providers:pulumi-python",
        },
    ]
    for number, (kind, ident) in enumerate(held):
        resources.append(
            {
                "urn": f"urn:pulumi:dev::team::{kind}::r{number}",
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


def dead_pid() -> int:
    process = subprocess.Popen([sys.executable, "-c", "pass"])
    process.wait()
    return process.pid


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


def test_an_interrupted_create_in_the_journal_is_labelled_with_its_time(emulator, client):
    request = ModelResourceCreateRequest(base_model=MODEL)
    ident = client.create_model_resource(request).id
    entry = journal.begin("model resource", client.base_url, request.to_wire())
    entry.pid = dead_pid()  # the `pulumi up` that wrote it is gone
    entry.record(ident)
    unlabelled = new_resource(client)

    found = {o.id: o for o in orphans.find_orphans(client, set(), journal.entries())}

    assert found[ident].interrupted_at == entry.started
    assert found[unlabelled].interrupted_at is None
    stamp = entry.started.astimezone(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    assert orphans.format_line(found[ident]).endswith(f"left by an interrupted pulumi up at {stamp}")
    assert "interrupted" not in orphans.format_line(found[unlabelled])


def test_an_object_a_running_process_is_creating_is_left_out_with_a_note(emulator, client):
    request = ModelResourceCreateRequest(base_model=MODEL)
    ident = client.create_model_resource(request).id
    entry = journal.begin("model resource", client.base_url, request.to_wire())
    entry.pid = 1  # alive, and not us: another `pulumi up` on this machine, its create still in flight
    entry.record(ident)
    elsewhere = journal.begin("model resource", "https://api.together.ai", request.to_wire())
    elsewhere.pid = dead_pid()
    elsewhere.record(ident)  # the same id but another API: says nothing about this one
    notes: list[str] = []

    found = orphans.find_orphans(client, set(), journal.entries(), note=notes.append)

    assert found == []
    assert len(notes) == 1 and ident in notes[0] and "pid 1" in notes[0]


def test_objects_younger_than_min_age_are_left_out(emulator, client):
    ident = new_resource(client)
    notes: list[str] = []
    now = datetime.now(timezone.utc)

    assert orphans.find_orphans(client, set(), [], min_age=600, now=now, note=notes.append) == []
    assert ident in notes[0] and "--min-age" in notes[0]
    later = now + timedelta(minutes=11)
    assert [o.id for o in orphans.find_orphans(client, set(), [], min_age=600, now=later)] == [ident]


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
    assert orphans.summary([], held=3, states=1).startswith("No orphans: every active model resource")


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
        f"stopping model resource ({stray}): the API refused it (HTTP 409: busy)"
    )
