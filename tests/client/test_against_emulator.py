"""The client against the emulator over real loopback HTTP: every endpoint, paging, faults, error mapping."""

from __future__ import annotations

import logging
import threading

import httpx
import pytest

from pulumi_together_rl.client import (
    BadRequest,
    ComputeConfigParams,
    Conflict,
    GpuType,
    LoraConfig,
    ModelResourceCreateRequest,
    ModelResourceStatus,
    NotFound,
    RateLimited,
    ServerError,
    SessionMetadata,
    TogetherError,
    TogetherRL,
    TrainingSessionCreateRequest,
    TrainingSessionStatus,
    TrainingSessionUpdateRequest,
    Unauthorized,
    WandbMetadata,
)
from pulumi_together_rl.client.transport import user_agent

from .scripted import Sleeps

MODEL = "Qwen/Qwen3.5-4B"
LORA = ModelResourceCreateRequest(base_model=MODEL)
FULL = ModelResourceCreateRequest(base_model=MODEL, lora_enabled=False)
RESOURCES_PATH = "^/v1/rl/model-resources$"
SESSIONS_PATH = "^/v1/rl/training-sessions$"


@pytest.fixture
def sleeps() -> Sleeps:
    return Sleeps()


@pytest.fixture
def api(emulator, sleeps):
    """A client configured only from the environment the fixture set (TOGETHER_BASE_URL / TOGETHER_API_KEY)."""
    with TogetherRL(sleep=sleeps, rng=lambda: 0.5) as client:
        yield client


def ready_resource(api, req=LORA):
    created = api.create_model_resource(req)
    resource = api.get_model_resource(created.id)  # zero timings: the next request sees READY
    assert resource.status is ModelResourceStatus.READY
    return resource


def posts(emulator, path: str) -> list[dict]:
    return [r for r in emulator.control.requests() if r["method"] == "POST" and r["path"] == path]


def _raw_post(emulator, path: str, body) -> dict:
    """A request from "another process": plain httpx with the same key, outside this client's claims."""
    answer = httpx.post(
        f"{emulator.base_url}{path}", headers={"Authorization": f"Bearer {emulator.api_key}"}, json=body
    )
    assert answer.status_code == 200, answer.text
    return answer.json()


# ------------------------------------------------------------------------------------------ endpoints


def test_model_resource_endpoints(api, emulator):
    models = api.list_supported_models()
    assert MODEL in {m.base_model for m in models.data}
    cost = api.estimate_model_resource_cost(LORA)
    assert cost.currency == "USD" and cost.price_per_hour > 0

    created = api.create_model_resource(
        ModelResourceCreateRequest(
            base_model=MODEL, compute_config=ComputeConfigParams(num_generator_replicas=1)
        )
    )
    assert created.status is ModelResourceStatus.PENDING
    assert created.compute_config.gpu_type is GpuType.B200_SXM  # the model's default GPU
    ready = api.get_model_resource(created.id)
    assert ready.status is ModelResourceStatus.READY
    assert ready.expires_at is not None

    assert [r.id for r in api.list_model_resources(status=[ModelResourceStatus.READY]).data] == [created.id]
    assert api.list_model_resources(status=["PENDING", ModelResourceStatus.CREATING]).data == []
    assert [r.id for r in api.list_model_resources(created_by="me").data] == [created.id]

    extended = api.extend_model_resource_expiry(created.id, 86400)
    assert extended.expires_at > ready.expires_at

    stopping = api.stop_model_resource(created.id)
    assert stopping.status is ModelResourceStatus.STOPPING
    assert api.get_model_resource(created.id).status is ModelResourceStatus.STOPPED
    # Stopping again is harmless.
    assert api.stop_model_resource(created.id).status is ModelResourceStatus.STOPPED


def test_training_session_endpoints(api, emulator):
    resource = ready_resource(api)
    created = api.create_training_session(
        TrainingSessionCreateRequest(
            model_resources_id=resource.id,
            display_name="exp-1",
            lora_config=LoraConfig(rank=8),
            metadata=SessionMetadata(wandb=WandbMetadata(project="p", entity="e")),
        )
    )
    assert created.status is TrainingSessionStatus.CREATING
    assert created.base_model == MODEL
    assert created.lora_config.rank == 8
    assert isinstance(created.step, int) and isinstance(created.policy_state.trainer_step, int)

    running = api.get_training_session(created.id)
    assert running.status is TrainingSessionStatus.RUNNING
    listed = api.list_training_sessions(model_resources_id=resource.id, created_by="me", status=["RUNNING"])
    assert [s.id for s in listed.data] == [created.id]

    updated = api.update_training_session(
        created.id,
        TrainingSessionUpdateRequest(
            display_name="", metadata=SessionMetadata(wandb=WandbMetadata(project=""))
        ),
    )
    assert updated.display_name is None
    assert updated.metadata.wandb.entity == "e"
    assert not updated.metadata.wandb.project

    assert api.stop_training_session(created.id).status is TrainingSessionStatus.STOPPING
    assert api.get_training_session(created.id).status is TrainingSessionStatus.STOPPED


def test_stop_of_resource_with_sessions_needs_force(api, emulator):
    resource = ready_resource(api)
    session = api.create_training_session(TrainingSessionCreateRequest(model_resources_id=resource.id))
    with pytest.raises(Conflict) as caught:
        api.stop_model_resource(resource.id)
    assert (caught.value.status, caught.value.type) == (409, "conflict")
    assert session.id in caught.value.message
    assert api.stop_model_resource(resource.id, force=True).status is ModelResourceStatus.STOPPING
    assert api.get_training_session(session.id).status in {
        TrainingSessionStatus.STOPPING,
        TrainingSessionStatus.STOPPED,
    }


def test_iter_model_resources_follows_pages(api, emulator):
    made = [api.create_model_resource(LORA).id for _ in range(7)]
    emulator.control.clear_requests()
    seen = [r.id for r in api.iter_model_resources(created_by="me", page_size=3)]
    assert seen == list(reversed(made))  # newest first, each exactly once
    lists = [r for r in emulator.control.requests() if r["path"] == "/v1/rl/model-resources"]
    assert len(lists) == 3
    assert all("limit=3" in r["query"] for r in lists)
    assert [("after=" in r["query"]) for r in lists] == [False, True, True]


def test_iter_training_sessions_follows_pages(api, emulator):
    resource = ready_resource(api)
    made = {
        api.create_training_session(TrainingSessionCreateRequest(model_resources_id=resource.id)).id
        for _ in range(5)
    }
    seen = [s.id for s in api.iter_training_sessions(model_resources_id=resource.id, page_size=2)]
    assert sorted(seen) == sorted(made)


# ------------------------------------------------------------------------------------- creates + faults


def test_a_resource_create_whose_answer_was_lost_after_acting_takes_the_one_it_made(api, emulator, capsys):
    emulator.control.add_fault(
        method="POST", path=RESOURCES_PATH, status=503, act_then_fail=True, drop_connection=True, times=1
    )
    got = api.create_model_resource(LORA)
    resources = emulator.control.state()["model_resources"]
    assert [r["id"] for r in resources] == [got.id]
    # One POST: the faulted one, which the server did act on; it was never resent.
    assert [(bool(r["fault"]), r["handled"]) for r in posts(emulator, "/v1/rl/model-resources")] == [
        (True, True)
    ]
    assert (
        f"model resource {got.id}: taken as this create's by a match, not by an answer"
        in capsys.readouterr().err
    )


def test_a_session_create_whose_answer_was_lost_after_acting_takes_the_one_it_made(api, emulator, capsys):
    resource = ready_resource(api)
    emulator.control.add_fault(
        method="POST", path=SESSIONS_PATH, status=503, act_then_fail=True, drop_connection=True, times=1
    )
    got = api.create_training_session(
        TrainingSessionCreateRequest(model_resources_id=resource.id, display_name="a")
    )
    sessions = emulator.control.state()["training_sessions"]
    assert [s["id"] for s in sessions] == [got.id]
    assert got.display_name == "a"
    assert [(bool(r["fault"]), r["handled"]) for r in posts(emulator, "/v1/rl/training-sessions")] == [
        (True, True)
    ]
    assert f"training session {got.id}: taken as this create's by a match" in capsys.readouterr().err


def test_a_model_resource_the_api_answered_as_failed_after_acting_is_named_and_not_taken(api, emulator):
    """The API's own 503 says "failed", yet it acted: the one new look-alike is named, never taken on a match
    (a colleague's identical request is as likely: the per-kind rule), and nothing is resent."""
    emulator.control.add_fault(method="POST", path=RESOURCES_PATH, status=503, act_then_fail=True, times=1)
    emulator.control.clear_requests()
    with pytest.raises(ServerError) as caught:
        api.create_model_resource(LORA)
    made = [o["id"] for o in emulator.control.state()["model_resources"]]
    assert len(made) == 1 and made[0] in str(caught.value)
    assert caught.value.maybe_created is True
    assert "the API itself answered that the create failed" in str(caught.value)
    assert len(posts(emulator, RESOURCES_PATH.strip("^$"))) == 1  # never resent


def test_a_session_the_api_answered_as_failed_after_acting_is_taken_on_its_gpu(api, emulator, capsys):
    """The API's own 503 says "failed", yet it acted: a session's request names this stack's GPU, so the one new
    look-alike on it inside the POST's window is this create's (the per-kind rule): taken, nothing resent."""
    resource = ready_resource(api)
    emulator.control.add_fault(method="POST", path=SESSIONS_PATH, status=503, act_then_fail=True, times=1)
    emulator.control.clear_requests()
    got = api.create_training_session(TrainingSessionCreateRequest(model_resources_id=resource.id))
    assert [s["id"] for s in emulator.control.state()["training_sessions"]] == [got.id]
    assert len(posts(emulator, SESSIONS_PATH.strip("^$"))) == 1  # never resent
    assert f"training session {got.id}: taken as this create's by a match" in capsys.readouterr().err


FOREIGN_SESSION = {
    "lora_config": {"alpha": 8, "dropout": 0.5},
    "metadata": {"wandb": {"run_name": "someone-else"}},
}
MY_SESSION = {
    "lora_config": LoraConfig(alpha=128, dropout=0.0),
    "metadata": SessionMetadata(wandb=WandbMetadata(run_name="mine")),
}


@pytest.mark.parametrize("when", ["before-the-create", "after-the-snapshot"])
def test_session_act_then_fail_does_not_adopt_a_foreign_session(api, emulator, monkeypatch, when):
    """Another process (same key, not this client's claims) starts a session on the same resource with other
    inputs: before our create (the snapshot excludes it) or between our snapshot and our send (only the
    inputs tell the two apart). Either way we get our own session, and the foreign one is left alone."""
    resource = ready_resource(api)
    other: dict = {}

    def start_foreign() -> None:
        other.update(
            _raw_post(
                emulator, "/v1/rl/training-sessions", {"model_resources_id": resource.id, **FOREIGN_SESSION}
            )
        )
        # Our create's POST (the next one) acts, then its connection drops: a match may be taken.
        emulator.control.add_fault(
            method="POST", path=SESSIONS_PATH, status=503, act_then_fail=True, drop_connection=True, times=1
        )

    if when == "before-the-create":
        start_foreign()
    else:
        snapshot = api.active_training_session_ids

        def snapshot_then_foreign(model_resources_id: str) -> frozenset[str]:
            ids = snapshot(model_resources_id)
            start_foreign()
            return ids

        monkeypatch.setattr(api, "active_training_session_ids", snapshot_then_foreign)
    got = api.create_training_session(
        TrainingSessionCreateRequest(model_resources_id=resource.id, **MY_SESSION)
    )
    assert other and got.id != other["id"]
    assert (got.lora_config.alpha, got.metadata.wandb.run_name) == (128, "mine")
    assert len(emulator.control.state()["training_sessions"]) == 2
    assert len(posts(emulator, "/v1/rl/training-sessions")) == 2  # the foreign one and our faulted one


def test_create_that_keeps_failing_leaves_nothing_and_says_where_to_look(emulator, sleeps):
    emulator.control.add_fault(method="POST", path=RESOURCES_PATH, status=503, times=None)
    with TogetherRL(sleep=sleeps, max_attempts=3) as client, pytest.raises(ServerError) as caught:
        client.create_model_resource(LORA)
    assert "created_by=me" in str(caught.value)
    assert emulator.control.state()["model_resources"] == []
    assert len(posts(emulator, "/v1/rl/model-resources")) == 3


def test_concurrent_identical_creates_under_act_then_fail_never_share_or_resend(emulator):
    """Four identical creates on one client, two of whose POSTs act and answer 503: the two answered ones
    keep theirs; a failed one takes a new object only when it is the only one its snapshot did not hold, else
    it fails saying it may exist (never a guess between look-alikes). Never two creates on one object, never a
    fifth object."""
    emulator.control.add_fault(method="POST", path=RESOURCES_PATH, status=503, act_then_fail=True, times=2)
    ids: list[str] = []
    failures: list[TogetherError] = []
    lock = threading.Lock()

    shared = TogetherRL(sleep=lambda s: None)  # one client, four threads: how the provider uses it

    def create() -> None:
        try:
            made = shared.create_model_resource(LORA).id
        except TogetherError as exc:
            with lock:
                failures.append(exc)
        else:
            with lock:
                ids.append(made)

    threads = [threading.Thread(target=create) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    shared.close()
    in_state = sorted(r["id"] for r in emulator.control.state()["model_resources"])
    assert len(in_state) == 4  # never resent
    assert len(ids) + len(failures) == 4 and len(ids) >= 2
    assert len(set(ids)) == len(ids) and set(ids) <= set(in_state)
    assert all(f.maybe_created for f in failures)


def test_get_answered_429_with_retry_after_is_retried(api, emulator, sleeps):
    resource = api.create_model_resource(LORA)
    emulator.control.add_fault(
        method="GET", path="^/v1/rl/model-resources/", status=429, retry_after=3, times=1
    )
    assert api.get_model_resource(resource.id).id == resource.id
    assert sleeps == [3.0]
    gets = [
        r["status"]
        for r in emulator.control.requests()
        if r["path"] == f"/v1/rl/model-resources/{resource.id}"
    ]
    assert gets == [429, 200]


def test_list_answered_503_twice_is_retried_with_backoff(api, emulator, sleeps):
    emulator.control.add_fault(method="GET", path="^/v1/rl/training-sessions$", status=503, times=2)
    assert api.list_training_sessions().data == []
    assert sleeps == [0.25, 0.5]  # rng 0.5 x (0.5 s, 1 s)


# ------------------------------------------------------------------------------------------ errors


def test_validation_error_carries_param(api, emulator):
    resource = ready_resource(api)
    with pytest.raises(BadRequest) as caught:
        api.extend_model_resource_expiry(resource.id, 10)
    assert (caught.value.status, caught.value.param, caught.value.type) == (
        400,
        "seconds",
        "invalid_request_error",
    )
    with pytest.raises(BadRequest) as caught:
        api.list_model_resources(limit=500)
    assert caught.value.param == "limit"


def test_wrong_key_is_unauthorized(emulator):
    emulator.control.configure(api_key="the-only-good-key")
    with TogetherRL(api_key="some-other-key") as client, pytest.raises(Unauthorized) as caught:
        client.list_supported_models()
    assert caught.value.status == 401
    assert "some-other-key" not in str(caught.value)
    with TogetherRL(api_key="the-only-good-key") as client:
        assert client.list_supported_models().data


def test_unknown_id_is_not_found(api, emulator):
    with pytest.raises(NotFound) as caught:
        api.get_training_session("00000000-0000-0000-0000-000000000000")
    assert (caught.value.status, caught.value.type) == (404, "not_found")


def test_session_cap_is_rate_limited_at_once_and_makes_nothing(emulator, sleeps):
    with TogetherRL(sleep=sleeps) as client:
        resource = ready_resource(client, FULL)
        client.create_training_session(TrainingSessionCreateRequest(model_resources_id=resource.id))
        emulator.control.clear_requests()
        with pytest.raises(RateLimited) as caught:
            client.create_training_session(TrainingSessionCreateRequest(model_resources_id=resource.id))
    assert caught.value.status == 429
    assert caught.value.retry_after is not None and caught.value.retry_after > 0
    assert caught.value.code == "session_limit_reached"
    assert len(emulator.control.state()["training_sessions"]) == 1
    # The cap is hard: no resend and no sleeping (the emulator asks for Retry-After all the same).
    assert len(posts(emulator, "/v1/rl/training-sessions")) == 1
    assert sleeps == []


def test_lora_session_cap_is_rate_limited_at_once(emulator, sleeps):
    emulator.control.configure(session_cap_lora=1)
    with TogetherRL(sleep=sleeps) as client:
        resource = ready_resource(client)
        client.create_training_session(TrainingSessionCreateRequest(model_resources_id=resource.id))
        emulator.control.clear_requests()
        with pytest.raises(RateLimited):
            client.create_training_session(TrainingSessionCreateRequest(model_resources_id=resource.id))
    assert (len(posts(emulator, "/v1/rl/training-sessions")), sum(sleeps)) == (1, 0)


def test_a_throttling_429_on_a_session_create_is_retried_and_makes_one_session(emulator, sleeps):
    with TogetherRL(sleep=sleeps) as client:
        resource = ready_resource(client)
        emulator.control.clear_requests()
        # Throttling, not the cap: no session-limit code, no model_resources_id param.
        emulator.control.add_fault(method="POST", path=r"^/v1/rl/training-sessions$", status=429, times=2)
        session = client.create_training_session(TrainingSessionCreateRequest(model_resources_id=resource.id))
    assert [s["id"] for s in emulator.control.state()["training_sessions"]] == [session.id]
    assert len(posts(emulator, "/v1/rl/training-sessions")) == 3  # two refused, the third made it
    assert len(sleeps) >= 2


# ----------------------------------------------------------------------------------------- hygiene


def test_requests_carry_user_agent_and_logs_never_show_the_key(api, emulator, caplog):
    emulator.control.add_fault(method="GET", path="^/v1/rl/supported-models$", status=503, times=1)
    with caplog.at_level(logging.DEBUG):
        api.list_supported_models()
        api.create_model_resource(LORA)
    assert caplog.records  # httpx/httpcore and our retry line did log
    assert all(emulator.api_key not in r.getMessage() for r in caplog.records)
    assert {r["user_agent"] for r in emulator.control.requests()} == {user_agent()}
