"""One logical create never yields two objects: ambiguous failures are reconciled, never resent blindly."""

from __future__ import annotations

import threading

import httpx
import pytest

from pulumi_together_rl.client import (
    ApiConnectionError,
    ApiTimeout,
    BadRequest,
    ComputeConfigParams,
    GpuType,
    LoraConfig,
    ModelResourceCreateRequest,
    OptimizerConfig,
    RateLimited,
    ServerError,
    TrainingSessionCreateRequest,
)
from pulumi_together_rl.client.api import ModelResource, TrainingSession, resource_matches, session_matches
from pulumi_together_rl.client.models import AdamConfig, MuonConfig

from .scripted import Script, Sleeps, ago, error, make_client, now, page, reply, resource_json, session_json

REQ = ModelResourceCreateRequest(base_model="Qwen/Qwen3.5-4B")
SESSION_REQ = TrainingSessionCreateRequest(model_resources_id="mr_1", display_name="exp-1")

AMBIGUOUS = [
    pytest.param(lambda: error(503, "unavailable"), ServerError, id="503"),
    pytest.param(lambda: error(500, "internal"), ServerError, id="500"),
    pytest.param(lambda: httpx.ReadTimeout, ApiTimeout, id="read-timeout"),
    pytest.param(lambda: httpx.RemoteProtocolError, ApiConnectionError, id="dropped-connection"),
    pytest.param(lambda: httpx.ReadError, ApiConnectionError, id="read-error"),
]


@pytest.mark.parametrize(("failure", "kind"), AMBIGUOUS)
def test_create_is_not_resent_when_the_lookup_finds_what_it_made(failure, kind, capsys):
    script = Script(failure(), page([resource_json("mr_9")]))
    got = make_client(script).create_model_resource(REQ)
    assert got.id == "mr_9"
    assert script.calls() == ["POST /v1/rl/model-resources", "GET /v1/rl/model-resources"]
    assert script.requests[1].url.params["created_by"] == "me"
    line = capsys.readouterr().err.strip()
    assert line.startswith("create of model resource answered ")
    assert line.endswith("found the model resource it made: mr_9")


@pytest.mark.parametrize(("failure", "kind"), AMBIGUOUS)
def test_create_is_resent_only_after_the_lookup_finds_nothing(failure, kind):
    script = Script(failure(), page([]), reply(200, resource_json("mr_2")))
    got = make_client(script).create_model_resource(REQ)
    assert got.id == "mr_2"
    assert script.calls() == [
        "POST /v1/rl/model-resources",
        "GET /v1/rl/model-resources",
        "POST /v1/rl/model-resources",
    ]


@pytest.mark.parametrize("failure", [httpx.ConnectError, httpx.ConnectTimeout])
def test_connect_failure_on_create_is_retried_without_a_lookup(failure):
    script = Script(failure, reply(200, resource_json("mr_1")))
    sleeps = Sleeps()
    assert make_client(script, sleeps=sleeps).create_model_resource(REQ).id == "mr_1"
    assert script.calls() == ["POST /v1/rl/model-resources"] * 2
    assert sleeps == [0.5]


def test_429_on_create_is_retried_honouring_retry_after_without_a_lookup():
    script = Script(error(429, "slow", headers={"Retry-After": "2"}), reply(200, resource_json("mr_1")))
    sleeps = Sleeps()
    assert make_client(script, sleeps=sleeps).create_model_resource(REQ).id == "mr_1"
    assert script.calls() == ["POST /v1/rl/model-resources"] * 2
    assert sleeps == [2.0]


def test_429_on_create_gives_up_after_the_attempt_budget():
    script = Script(*[error(429, "cap", headers={"Retry-After": "1"})] * 3)
    with pytest.raises(RateLimited):
        make_client(script, max_attempts=3).create_training_session(SESSION_REQ)
    assert script.calls() == ["POST /v1/rl/training-sessions"] * 3


def test_validation_error_on_create_is_raised_at_once():
    script = Script(error(400, "bad", param="base_model"))
    with pytest.raises(BadRequest) as caught:
        make_client(script).create_model_resource(REQ)
    assert caught.value.param == "base_model"
    assert len(script.requests) == 1


def test_create_gives_up_within_the_budget_and_says_how_to_find_a_stray_object():
    script = Script()
    for _ in range(3):
        script.add(error(503, "still down"), page([]))
    sleeps = Sleeps()
    with pytest.raises(ServerError) as caught:
        make_client(script, sleeps=sleeps, max_attempts=3).create_model_resource(REQ)
    assert script.calls("POST") == ["POST /v1/rl/model-resources"] * 3
    assert script.calls("GET") == ["GET /v1/rl/model-resources"] * 3
    assert len(sleeps) == 3  # one backoff before each lookup, none wasted after the last
    text = str(caught.value)
    assert "still down" in text
    assert "may have succeeded anyway" in text
    assert "created_by=me" in text
    assert caught.value.status == 503


def test_failed_lookup_raises_the_create_error_with_the_hint():
    script = Script(httpx.ReadTimeout, error(500, "list broken"), error(500, "list broken"))
    with pytest.raises(ApiTimeout) as caught:
        make_client(script, max_attempts=2).create_training_session(SESSION_REQ)
    err = caught.value
    assert err.maybe_sent is True
    assert "created_by=me" in str(err)
    assert "looking for it failed" in str(err)
    assert "list broken" in str(err)
    assert script.calls("POST") == ["POST /v1/rl/training-sessions"]


def test_session_create_reconciles_by_resource_and_display_name(capsys):
    script = Script(
        error(503),
        page(
            [
                session_json("ts_other", display_name="exp-2"),
                session_json("ts_mine", display_name="exp-1"),
            ]
        ),
    )
    got = make_client(script).create_training_session(SESSION_REQ)
    assert got.id == "ts_mine"
    params = script.requests[1].url.params
    assert (params["created_by"], params["model_resources_id"]) == ("me", "mr_1")
    assert "found the training session it made: ts_mine" in capsys.readouterr().err


def test_lookup_picks_the_oldest_match_and_never_the_same_one_twice():
    older, newer = resource_json("mr_old", created_at=ago(5)), resource_json("mr_new", created_at=ago(1))
    script = Script(page([newer, older]), page([newer, older]), page([newer, older]))
    client = make_client(script)
    assert client.find_created_model_resource(REQ, since=ago(10)).id == "mr_old"
    assert client.find_created_model_resource(REQ, since=ago(10)).id == "mr_new"
    assert client.find_created_model_resource(REQ, since=ago(10)) is None


def test_lookup_skips_excluded_ids_and_ids_a_create_already_returned():
    script = Script(
        reply(200, resource_json("mr_returned")),
        page([resource_json("mr_excluded"), resource_json("mr_returned")]),
    )
    client = make_client(script)
    assert client.create_model_resource(REQ).id == "mr_returned"
    assert client.find_created_model_resource(REQ, since=ago(10), exclude_ids=["mr_excluded"]) is None


def test_lookup_ignores_objects_created_before_since_minus_skew():
    script = Script(page([resource_json("mr_ancient", created_at=ago(3600))]))
    assert make_client(script).find_created_model_resource(REQ, since=ago(60)) is None


def test_lookup_tolerates_a_little_clock_skew():
    script = Script(page([resource_json("mr_skewed", created_at=ago(100))]))
    assert make_client(script).find_created_model_resource(REQ, since=now()).id == "mr_skewed"


def test_lookup_stops_paging_once_past_the_cutoff():
    script = Script(
        page([resource_json("mr_a", base_model="other", created_at=ago(1))], next_cursor="mr_a"),
        page([resource_json("mr_b", base_model="other", created_at=ago(7200))], next_cursor="mr_b"),
        # a third page would be an unexpected request
    )
    assert make_client(script).find_created_model_resource(REQ, since=ago(10)) is None
    assert len(script.requests) == 2
    assert script.requests[1].url.params["after"] == "mr_a"


def test_lookup_reads_every_page_when_the_list_is_oldest_first():
    script = Script(
        page([resource_json("mr_a", created_at=ago(7200))], next_cursor="mr_a"),
        page([resource_json("mr_b", created_at=ago(3))], next_cursor="mr_b"),
        page([resource_json("mr_c", created_at=ago(2))]),
    )
    assert make_client(script).find_created_model_resource(REQ, since=ago(10)).id == "mr_b"
    assert len(script.requests) == 3


def _resource(**overrides) -> ModelResource:
    return ModelResource.model_validate(resource_json("mr_x", **overrides))


@pytest.mark.parametrize(
    ("req", "overrides", "matches"),
    [
        (REQ, {}, True),
        (REQ, {"base_model": "other"}, False),
        (REQ, {"lora_enabled": False}, False),  # lora_enabled defaults to true
        (
            ModelResourceCreateRequest(base_model="Qwen/Qwen3.5-4B", lora_enabled=False),
            {"lora_enabled": False},
            True,
        ),
        (
            ModelResourceCreateRequest(
                base_model="Qwen/Qwen3.5-4B", compute_config=ComputeConfigParams(gpu_type=GpuType.H100_80GB)
            ),
            {},
            False,
        ),
        (
            ModelResourceCreateRequest(
                base_model="Qwen/Qwen3.5-4B", compute_config=ComputeConfigParams(num_generator_replicas=0)
            ),
            {},
            False,
        ),
        (
            ModelResourceCreateRequest(
                base_model="Qwen/Qwen3.5-4B", compute_config=ComputeConfigParams(num_generator_replicas=1)
            ),
            {},
            True,
        ),
        (ModelResourceCreateRequest(base_model="Qwen/Qwen3.5-4B", inactive_timeout=600), {}, False),
        (
            ModelResourceCreateRequest(base_model="Qwen/Qwen3.5-4B", inactive_timeout=600),
            {"inactive_timeout": 600},
            True,
        ),
        (
            ModelResourceCreateRequest(
                base_model="Qwen/Qwen3.5-4B", optimizer_config=OptimizerConfig(muon=MuonConfig())
            ),
            {},
            False,
        ),
        (
            ModelResourceCreateRequest(
                base_model="Qwen/Qwen3.5-4B", optimizer_config=OptimizerConfig(adam=AdamConfig())
            ),
            {"optimizer_config": {"adamw": {}}},
            True,
        ),
        (
            ModelResourceCreateRequest(base_model="Qwen/Qwen3.5-4B", base_weights_ref="together://ml_abc"),
            {"base_weights_ref": "together://ml_abc@rv_123"},
            True,
        ),
        (
            ModelResourceCreateRequest(base_model="Qwen/Qwen3.5-4B", base_weights_ref="together://ml_abc"),
            {"base_weights_ref": "together://ml_abcd@rv_123"},
            False,
        ),
        (
            ModelResourceCreateRequest(
                base_model="Qwen/Qwen3.5-4B", base_weights_ref="together://ml_abc@rv_1"
            ),
            {"base_weights_ref": "together://ml_abc@rv_2"},
            False,
        ),
        (REQ, {"base_weights_ref": "together://ml_abc@rv_123"}, False),
    ],
)
def test_resource_matches_every_input_the_request_set(req, overrides, matches):
    assert resource_matches(req, _resource(**overrides)) is matches


@pytest.mark.parametrize(
    ("req", "overrides", "matches"),
    [
        (SESSION_REQ, {"display_name": "exp-1"}, True),
        (SESSION_REQ, {"display_name": "exp-2"}, False),
        (SESSION_REQ, {}, False),
        (TrainingSessionCreateRequest(model_resources_id="mr_1"), {}, True),
        (TrainingSessionCreateRequest(model_resources_id="mr_1"), {"display_name": "x"}, False),
        (TrainingSessionCreateRequest(model_resources_id="mr_2"), {}, False),
        (TrainingSessionCreateRequest(model_resources_id="mr_1", lora_config=LoraConfig(rank=8)), {}, False),
        (TrainingSessionCreateRequest(model_resources_id="mr_1", lora_config=LoraConfig(rank=32)), {}, True),
    ],
)
def test_session_matches_resource_display_name_and_rank(req, overrides, matches):
    assert session_matches(req, TrainingSession.model_validate(session_json("ts_x", **overrides))) is matches


def test_concurrent_identical_creates_never_share_an_object():
    """Two threads create identical resources; one create fails ambiguously after the server acted.

    The lookup must not hand the failed thread the object the other thread's create made.
    """
    created: list[dict] = []
    lock = threading.Lock()
    first_post_arrived = threading.Event()
    release_first = threading.Event()

    def server(request: httpx.Request) -> httpx.Response:
        if request.method == "GET":
            with lock:
                items = sorted(created, key=lambda r: r["created_at"], reverse=True)
            return page(items)
        with lock:
            n = len(created) + 1
            created.append(resource_json(f"mr_{n}"))
        if n == 1:
            # The first create acted, but its answer is slow: the second create fails meanwhile.
            first_post_arrived.set()
            release_first.wait(5)
            return reply(200, created[0])
        return error(503, "acted, then failed")

    results: dict[str, str] = {}

    def create(name: str) -> None:
        results[name] = make_client(server).create_model_resource(REQ).id

    slow = threading.Thread(target=create, args=("slow",))
    slow.start()
    assert first_post_arrived.wait(5)
    failing = threading.Thread(target=create, args=("failing",))
    failing.start()
    failing.join(0.2)
    assert failing.is_alive()  # its lookup waits for the create still in flight
    release_first.set()
    slow.join(5)
    failing.join(5)
    assert results == {"slow": "mr_1", "failing": "mr_2"}
    assert len(created) == 2


def test_make_client_rejects_zero_attempts():
    with pytest.raises(ValueError):
        make_client(Script(), max_attempts=0)
