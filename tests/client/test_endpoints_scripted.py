"""What each method sends (method, path, query, body) and how lists are paged, against scripted HTTP."""

from __future__ import annotations

import itertools
import logging

import pytest

from pulumi_together_rl.client import (
    ComputeConfigParams,
    ConfigurationError,
    GpuType,
    InvalidArgument,
    LoraConfig,
    ModelResourceCreateRequest,
    ModelResourceStatus,
    SessionMetadata,
    TogetherError,
    TrainingSessionCreateRequest,
    TrainingSessionStatus,
    TrainingSessionUpdateRequest,
    WandbMetadata,
    wire,
)

from .scripted import Script, body_of, make_client, page, reply, resource_json, session_json


def test_status_filter_is_sent_comma_joined():
    script = Script(page([]), page([]))
    client = make_client(script)
    client.list_model_resources(status=[ModelResourceStatus.READY, "MODEL_RESOURCES_STATUS_ERROR"], limit=5)
    client.list_training_sessions(
        status=["RUNNING", TrainingSessionStatus.STOPPING], model_resources_id="mr_1"
    )
    first, second = (r.url.params for r in script.requests)
    assert first.get_list("status") == ["MODEL_RESOURCES_STATUS_READY,MODEL_RESOURCES_STATUS_ERROR"]
    assert first["limit"] == "5"
    assert second.get_list("status") == ["TRAINING_SESSION_STATUS_RUNNING,TRAINING_SESSION_STATUS_STOPPING"]
    assert second["model_resources_id"] == "mr_1"


def test_single_status_and_no_filters():
    script = Script(page([]), page([]))
    client = make_client(script)
    client.list_model_resources(status=ModelResourceStatus.PENDING)
    client.list_model_resources()
    assert script.requests[0].url.params["status"] == "MODEL_RESOURCES_STATUS_PENDING"
    assert dict(script.requests[1].url.params) == {}


def test_list_passes_created_by_limit_and_after():
    script = Script(page([session_json("ts_2")], next_cursor="ts_2"))
    got = make_client(script).list_training_sessions(created_by="me", limit=1, after="ts_3")
    assert dict(script.requests[0].url.params) == {"created_by": "me", "limit": "1", "after": "ts_3"}
    assert [s.id for s in got.data] == ["ts_2"]
    assert got.meta.has_more is True
    assert got.meta.next_cursor == "ts_2"


def test_iter_follows_the_cursor_across_pages():
    script = Script(
        page([resource_json("mr_5"), resource_json("mr_4")], next_cursor="mr_4", limit=2),
        page([resource_json("mr_3"), resource_json("mr_2")], next_cursor="mr_2", limit=2),
        page([resource_json("mr_1")], limit=2),
    )
    ids = [r.id for r in make_client(script).iter_model_resources(created_by="me", page_size=2)]
    assert ids == ["mr_5", "mr_4", "mr_3", "mr_2", "mr_1"]
    assert [r.url.params.get("after") for r in script.requests] == [None, "mr_4", "mr_2"]
    assert {r.url.params["limit"] for r in script.requests} == {"2"}
    assert {r.url.params["created_by"] for r in script.requests} == {"me"}


def test_iter_sessions_stops_on_a_repeated_cursor():
    script = Script(
        page([session_json("ts_2")], next_cursor="ts_2"),
        page([session_json("ts_1")], next_cursor="ts_2"),
    )
    ids = [s.id for s in make_client(script).iter_training_sessions(model_resources_id="mr_1")]
    assert ids == ["ts_2", "ts_1"]
    assert len(script.requests) == 2


def test_iter_uses_the_last_id_when_has_more_but_no_cursor():
    script = Script(
        reply(200, {"data": [session_json("ts_2")], "meta": {"has_more": True}}),
        reply(200, {"data": [session_json("ts_1")]}),
    )
    ids = [s.id for s in make_client(script).iter_training_sessions()]
    assert ids == ["ts_2", "ts_1"]
    assert script.requests[1].url.params["after"] == "ts_2"


@pytest.mark.parametrize("size", [0, 101, True, 2.5])
def test_iter_rejects_page_size_out_of_range_when_called_not_at_the_first_next(size):
    script = Script()
    client = make_client(script)
    with pytest.raises(InvalidArgument) as caught:
        client.iter_model_resources(page_size=size)  # no next(): the check is eager
    assert isinstance(caught.value, ValueError)
    with pytest.raises(InvalidArgument):
        client.iter_training_sessions(page_size=size)
    assert script.requests == []


def test_iter_stops_on_a_cursor_cycle_without_repeating_items(caplog):
    """A server (or proxy cache) answering cursors a -> b -> a must not make the iterator loop forever."""
    nxt = {None: "a", "a": "b", "b": "a"}

    def server(request):
        after = request.url.params.get("after")
        return page([session_json(f"ts_{after or 0}")], next_cursor=nxt[after])

    script = Script(*[server] * 10)
    with caplog.at_level(logging.WARNING, logger="pulumi_together_rl.client"):
        ids = [s.id for s in itertools.islice(make_client(script).iter_training_sessions(), 50)]
    assert ids == ["ts_0", "ts_a", "ts_b"]
    assert len(script.requests) == 3
    assert any("twice" in r.getMessage() for r in caplog.records)


def test_iter_stops_after_the_page_cap(monkeypatch, caplog):
    monkeypatch.setattr(wire, "MAX_PAGES", 4)
    counter = itertools.count()

    def server(request):
        n = next(counter)
        return page([resource_json(f"mr_{n}")], next_cursor=f"c{n}")

    script = Script(*[server] * 10)
    with caplog.at_level(logging.WARNING, logger="pulumi_together_rl.client"):
        ids = [r.id for r in make_client(script).iter_model_resources()]
    assert ids == ["mr_0", "mr_1", "mr_2", "mr_3"]
    assert any("4 pages" in r.getMessage() for r in caplog.records)


@pytest.mark.parametrize(("force", "sent"), [(False, "false"), (True, "true")])
def test_stop_model_resource_sends_force_in_the_query(force, sent):
    script = Script(reply(200, resource_json("mr_1", status="MODEL_RESOURCES_STATUS_STOPPING")))
    make_client(script).stop_model_resource("mr_1", force=force)
    request = script.requests[0]
    assert (request.method, request.url.path, request.url.params["force"]) == (
        "POST",
        "/v1/rl/model-resources/mr_1/stop",
        sent,
    )
    assert request.content == b""


def test_ids_are_escaped_in_paths():
    script = Script(reply(200, resource_json("a b?c#d%2e")))
    make_client(script).get_model_resource("a b?c#d%2e")
    assert script.requests[0].url.raw_path == b"/v1/rl/model-resources/a%20b%3Fc%23d%252e"


@pytest.mark.parametrize("bad", ["", ".", "..", "a/b", "../mr_1", "a\\b", None])
def test_ids_that_could_change_the_path_are_refused_before_sending(bad):
    script = Script()
    client = make_client(script)
    calls = [
        lambda: client.get_training_session(bad),
        lambda: client.get_model_resource(bad),
        lambda: client.stop_model_resource(bad, force=True),
        lambda: client.stop_training_session(bad),
        lambda: client.extend_model_resource_expiry(bad, 3600),
        lambda: client.update_training_session(bad, TrainingSessionUpdateRequest(display_name="x")),
    ]
    for call in calls:
        with pytest.raises(InvalidArgument) as caught:
            call()
        assert isinstance(caught.value, TogetherError) and isinstance(caught.value, ValueError)
    assert script.requests == []


def test_extend_expiry_and_estimate_cost_bodies():
    script = Script(
        reply(200, resource_json("mr_1", status="MODEL_RESOURCES_STATUS_READY")),
        reply(200, {"currency": "USD", "price_per_hour": 12.5}),
    )
    client = make_client(script)
    client.extend_model_resource_expiry("mr_1", 7200)
    req = ModelResourceCreateRequest(
        base_model="Qwen/Qwen3.5-4B",
        compute_config=ComputeConfigParams(gpu_type=GpuType.B200_SXM),
        lora_enabled=False,
    )
    cost = client.estimate_model_resource_cost(req)
    assert script.calls() == [
        "POST /v1/rl/model-resources/mr_1/extend-expiry",
        "POST /v1/rl/model-resources/estimate-cost",
    ]
    assert body_of(script.requests[0]) == {"seconds": 7200}
    assert body_of(script.requests[1]) == {
        "base_model": "Qwen/Qwen3.5-4B",
        "compute_config": {"gpu_type": "B200-SXM"},
        "lora_enabled": False,
    }
    assert (cost.currency, cost.price_per_hour) == ("USD", 12.5)


def test_create_bodies_send_only_what_was_set():
    script = Script(page([]), reply(200, resource_json("mr_1")), page([]), reply(200, session_json("ts_1")))
    client = make_client(script)
    client.create_model_resource(ModelResourceCreateRequest(base_model="Qwen/Qwen3.5-4B"))
    client.create_training_session(
        TrainingSessionCreateRequest(
            model_resources_id="mr_1", display_name="run", lora_config=LoraConfig(rank=8)
        )
    )
    assert body_of(script.requests[1]) == {"base_model": "Qwen/Qwen3.5-4B"}
    assert body_of(script.requests[3]) == {
        "model_resources_id": "mr_1",
        "display_name": "run",
        "lora_config": {"rank": 8},
    }
    # Each create first lists the caller's active objects of its kind (its reconciliation snapshot).
    assert script.calls() == [
        "GET /v1/rl/model-resources",
        "POST /v1/rl/model-resources",
        "GET /v1/rl/training-sessions",
        "POST /v1/rl/training-sessions",
    ]


def test_patch_sends_empty_string_to_clear_and_omits_the_rest():
    script = Script(reply(200, session_json("ts_1")))
    update = TrainingSessionUpdateRequest(
        display_name="", metadata=SessionMetadata(wandb=WandbMetadata(project="p"))
    )
    make_client(script).update_training_session("ts_1", update)
    assert script.calls() == ["PATCH /v1/rl/training-sessions/ts_1"]
    assert body_of(script.requests[0]) == {"display_name": "", "metadata": {"wandb": {"project": "p"}}}


def test_get_and_stop_session_and_supported_models_paths():
    script = Script(
        reply(200, session_json("ts_1")),
        reply(200, session_json("ts_1", status="TRAINING_SESSION_STATUS_STOPPING")),
        reply(200, {"data": [{"base_model": "m", "default_gpu_type": "B200-SXM", "compute_configs": []}]}),
    )
    client = make_client(script)
    assert client.get_training_session("ts_1").step == 0
    assert client.stop_training_session("ts_1").status is TrainingSessionStatus.STOPPING
    assert client.list_supported_models().data[0].base_model == "m"
    assert script.calls() == [
        "GET /v1/rl/training-sessions/ts_1",
        "POST /v1/rl/training-sessions/ts_1/stop",
        "GET /v1/rl/supported-models",
    ]


def test_context_manager_closes_the_http_client():
    client = make_client(Script())
    with client as same:
        assert same is client
    assert client._transport._http.is_closed


def test_using_a_closed_client_is_a_configuration_error_not_a_runtime_error():
    script = Script()
    client = make_client(script)
    client.close()
    with pytest.raises(ConfigurationError, match="closed"):
        client.get_model_resource("mr_1")
    with pytest.raises(ConfigurationError, match="closed"):
        client.create_model_resource(ModelResourceCreateRequest(base_model="Qwen/Qwen3.5-4B"))
    assert script.requests == []
