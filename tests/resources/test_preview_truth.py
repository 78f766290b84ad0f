"""Check at preview: references checked (not skipped), sessions validated against a resource of the same change,
the estimated price and its ceiling, single-flight lookups, and no HTTP in diff."""

from __future__ import annotations

import threading

import pytest

from pulumi_together_rl.client.models import ModelResourceCreateRequest, TrainingSessionCreateRequest
from pulumi_together_rl.resources.inputs import UNKNOWN_SENTINEL

from .conftest import MODEL

BIG = "Qwen/Qwen3.5-35B-A3B"  # max_rank 32, LoRA only


def _failures(result):
    return [(f.property, f.reason) for f in result.failures]


def _new_session(**inputs):
    """A session on a resource of the same change: the id is unknown, its declared inputs are known."""
    return {"model_resources_id": UNKNOWN_SENTINEL, **inputs}


def test_a_rank_above_the_models_max_rank_fails_at_preview_with_no_resource_yet(rig):
    checked = rig.sessions.check(
        {}, _new_session(lora_config={"rank": 48}, model_resource_spec={"base_model": BIG})
    )

    (failure,) = _failures(checked)
    assert failure[0] == "lora_config.rank" and "max_rank 32" in failure[1] and "at most 32" in failure[1]
    assert not [r for r in rig.control.requests() if r["method"] == "POST"]


def test_lora_config_on_a_new_full_weight_resource_fails_at_preview(rig):
    spec = {"base_model": MODEL, "lora_enabled": False}
    checked = rig.sessions.check({}, _new_session(lora_config={"rank": 8}, model_resource_spec=spec))

    assert [f[0] for f in _failures(checked)] == ["lora_config"]
    assert "full-weight" in _failures(checked)[0][1]
    # A full-weight session (no lora_config) on it, and a LoRA one within the limits, pass.
    assert rig.sessions.check({}, _new_session(model_resource_spec=spec)).failures == []
    ok = _new_session(lora_config={"rank": 32}, model_resource_spec={"base_model": BIG})
    assert rig.sessions.check({}, ok).failures == []


def test_the_gpu_type_of_the_declared_resource_is_the_one_compared(rig):
    spec = {"base_model": BIG, "compute_config": {"gpu_type": "B200-SXM"}}
    checked = rig.sessions.check({}, _new_session(lora_config={"rank": 33}, model_resource_spec=spec))

    assert "on B200-SXM" in _failures(checked)[0][1]


def test_a_model_resources_id_that_does_not_exist_fails_naming_the_field(rig):
    checked = rig.sessions.check({}, {"model_resources_id": "mr-missing"})

    (failure,) = _failures(checked)
    # The id is quoted by its first 8 characters only: it could be a secret pasted into the wrong field.
    assert failure[0] == "model_resources_id" and "no model resource mr-missi… exists" in failure[1]
    assert "mr-missing" not in failure[1]
    assert "skipped" not in failure[1].lower()


def test_a_stopped_model_resource_fails_naming_the_field(rig):
    stopped = rig.client.create_model_resource(ModelResourceCreateRequest(base_model=MODEL))
    rig.client.stop_model_resource(stopped.id)

    (failure,) = _failures(rig.sessions.check({}, {"model_resources_id": stopped.id}))

    assert failure[0] == "model_resources_id" and "is STOP" in failure[1]


def test_a_known_resource_is_validated_without_lora_config_too(rig):
    live = rig.create_resource(lora_enabled=False).id

    assert rig.sessions.check({}, {"model_resources_id": live}).failures == []
    (failure,) = _failures(rig.sessions.check({}, {"model_resources_id": live, "lora_config": {"rank": 8}}))
    assert failure[0] == "lora_config" and f"model resource {live[:8]}… is full-weight" in failure[1]
    assert live not in failure[1]


@pytest.mark.parametrize("kind", ["resource", "session"])
def test_an_adopt_id_that_does_not_exist_fails_naming_the_field(rig, kind):
    if kind == "resource":
        checked = rig.resources.check({}, {"base_model": MODEL, "adopt_id": "mr-nope"})
    else:
        checked = rig.sessions.check(
            {}, {"model_resources_id": rig.create_resource().id, "adopt_id": "ts-nope"}
        )

    (failure,) = _failures(checked)
    assert failure[0] == "adopt_id" and "-nope exists" in failure[1] and "404" in failure[1]


def test_a_session_adopted_onto_the_wrong_base_model_fails_at_preview(rig):
    other = rig.create_resource().id  # Qwen3.5-4B
    existing = rig.client.create_training_session(TrainingSessionCreateRequest(model_resources_id=other))

    checked = rig.sessions.check(
        {}, _new_session(adopt_id=existing.id, model_resource_spec={"base_model": BIG})
    )

    (failure,) = _failures(checked)
    assert failure[0] == "adopt_id" and "another base model" in failure[1]


def test_an_unreachable_api_skips_with_a_warning_that_says_what_was_skipped(rig, capsys):
    rig.control.add_fault(method="GET", path=r"/model-resources/", status=503, times=100)

    assert rig.sessions.check({}, {"model_resources_id": "mr-any", "display_name": "s"}).failures == []

    err = capsys.readouterr().err
    assert "warning: checking training session (s) against the API" in err
    assert "Skipped the remote checks (supported model, limits, references and cost)" in err


def test_the_estimated_price_is_in_the_checked_inputs_and_on_stderr(rig, capsys):
    checked = rig.resources.check({}, {"base_model": MODEL, "compute_config": {"num_generator_replicas": 2}})

    assert checked.failures == []
    # The emulator's table: 1 LoRA trainer GPU + 2 x 1 generator GPU, B200 at 5.50 USD/h.
    assert checked.inputs["price_per_hour"] == 16.5 and checked.inputs["currency"] == "USD"
    assert "model resource (Qwen/Qwen3.5-4B): estimated 16.50 USD/h" in capsys.readouterr().err


def test_a_replacement_says_its_price_once_though_the_engine_checks_it_twice(rig, capsys):
    """Before a replacement the engine checks the new inputs again without the old ones (for names a provider
    might generate): the line of the first check is not said again. Another declaration of the same body says
    its own."""
    olds = rig.resources.check({}, {"base_model": MODEL, "owner": "o/p/dev/gpu"}).inputs
    capsys.readouterr()
    news = {"base_model": BIG, "owner": "o/p/dev/gpu"}

    first, second = rig.resources.check(olds, news), rig.resources.check({}, news)
    rig.resources.check({}, {**news, "owner": "o/p/dev/other"})

    assert first.inputs == second.inputs and first.inputs["price_per_hour"] == 33.0
    assert capsys.readouterr().err.count(f"model resource ({BIG}): estimated 33.00 USD/h") == 2


def test_max_price_per_hour_below_the_estimate_fails_at_preview(rig):
    declared = {"base_model": MODEL, "max_price_per_hour": 10.0}

    (failure,) = _failures(rig.resources.check({}, declared))
    assert failure[0] == "max_price_per_hour" and "11.00 USD/h" in failure[1] and "10.00" in failure[1]
    assert rig.resources.check({}, {**declared, "max_price_per_hour": 11.0}).failures == []


def test_raising_the_ceiling_of_an_existing_resource_is_checked_against_its_last_estimate_without_http(rig):
    olds = rig.resources.check({}, {"base_model": MODEL, "max_price_per_hour": 20.0}).inputs
    rig.control.clear_requests()

    lowered = rig.resources.check(olds, {"base_model": MODEL, "max_price_per_hour": 5.0})

    assert [f[0] for f in _failures(lowered)] == ["max_price_per_hour"]
    assert rig.control.requests() == []


def test_a_body_the_api_refuses_fails_naming_the_param(rig):
    rig.control.add_fault(
        method="POST",
        path=r"/estimate-cost$",
        status=400,
        message="bad replicas",
        param="compute_config",
        times=1,
    )

    (failure,) = _failures(rig.resources.check({}, {"base_model": MODEL}))

    assert failure[0] == "compute_config" and "HTTP 400: bad replicas" in failure[1]


def test_concurrent_checks_of_one_body_make_one_estimate_and_one_models_request(rig):
    # Every answer takes a while, so the eight checks overlap.
    rig.control.add_fault(method="GET", path=r"/supported-models$", status=None, latency=0.3, times=100)
    rig.control.add_fault(method="POST", path=r"/estimate-cost$", status=None, latency=0.3, times=100)
    barrier = threading.Barrier(8)
    results = []

    def check() -> None:
        barrier.wait()
        results.append(rig.resources.check({}, {"base_model": MODEL}))

    threads = [threading.Thread(target=check) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()

    paths = [r["path"] for r in rig.control.requests()]
    assert paths.count("/v1/rl/model-resources/estimate-cost") == 1
    assert paths.count("/v1/rl/supported-models") == 1
    assert {r.inputs["price_per_hour"] for r in results} == {11.0} and all(not r.failures for r in results)


def test_diff_makes_no_http_call(rig):
    olds = rig.resources.check({}, {"base_model": MODEL}).inputs
    session_olds = {"model_resources_id": "mr-1", "display_name": "a"}
    rig.control.clear_requests()

    rig.resources.diff("mr-1", olds, {**olds, "base_model": BIG, "max_price_per_hour": 3.0})
    rig.resources.diff("mr-1", olds, {k: v for k, v in olds.items() if k != "price_per_hour"})
    rig.sessions.diff("ts-1", session_olds, {**session_olds, "display_name": "b", "lora_config": {"rank": 8}})

    assert rig.control.requests() == []


def test_a_changed_estimate_alone_is_no_diff(rig):
    olds = rig.resources.check({}, {"base_model": MODEL}).inputs

    diff = rig.resources.diff("mr-1", olds, {**olds, "price_per_hour": 99.0})

    assert diff.changes is False


def test_a_refresh_of_many_objects_is_one_list_per_kind(rig):
    created = [rig.create_resource() for _ in range(5)]
    rig.control.clear_requests()
    from pulumi_together_rl.resources import process

    process.clear_lookups()  # a new refresh
    for c in created:
        assert rig.resources.read(c.id, c.outs).id == c.id

    assert [(r["method"], r["path"]) for r in rig.control.requests()] == [("GET", "/v1/rl/model-resources")]
