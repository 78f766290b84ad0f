"""The remote part of check against the emulator, when the API answers something unexpected or not at all.

* An unexpected 4xx (414, 413, 405, 422 ...) is an answer about what was asked: a check failure naming the
  field it was about, never a traceback, never the id echoed back.
* Only a host failure (no connection, a timeout) is remembered for the rest of the preview; a 5xx, 429, 401
  or 403 skips this one check (with a warning) and the next check asks again.
* What the API says goes to stderr as one printable line.
"""

from __future__ import annotations

import pytest
from pulumi.dynamic import Config, ConfigureRequest

from pulumi_together_rl.client.models import ModelResourceCreateRequest
from pulumi_together_rl.resources.inputs import UNKNOWN_SENTINEL

from .conftest import MODEL

SECRET = "tk-live-0123456789abcdef0123456789abcdef"  # an id that is really a key pasted into the wrong field
LOOKUP = r"^/v1/rl/model-resources/[^/]+$"


def _failures(result):
    return [(f.property, f.reason) for f in result.failures]


def _lookups(rig, prefix: str) -> list[dict]:
    return [r for r in rig.control.requests() if r["method"] == "GET" and r["path"].startswith(prefix)]


# ----------------------------------------------------------------------------------------- over-long ids


def test_an_adopt_id_of_10000_characters_fails_locally_and_never_reaches_the_api(rig):
    checked = rig.resources.check({}, {"base_model": MODEL, "adopt_id": "a" * 10_000})

    ((field, reason),) = _failures(checked)
    assert field == "adopt_id" and reason.startswith("adopt_id: string should have at most 256 characters")
    assert "a" * 20 not in reason
    assert _lookups(rig, "/v1/rl/model-resources/") == []


# ----------------------------------------------------------------------- an unexpected 4xx at check


@pytest.mark.parametrize("status", [414, 413, 405, 410, 422, 400, 409])
def test_an_unexpected_4xx_for_a_resources_adopt_id_fails_naming_adopt_id(rig, status):
    adopt_id = SECRET * 5  # 200 characters: within the local ceiling, refused by the "server"
    rig.control.add_fault(method="GET", path=LOOKUP, status=status, times=10)

    checked = rig.resources.check({}, {"base_model": MODEL, "adopt_id": adopt_id})

    ((field, reason),) = _failures(checked)
    assert field == "adopt_id"
    assert f"HTTP {status}" in reason and "GET /v1/rl/model-resources/<adopt_id>" in reason
    assert SECRET not in reason and "Check adopt_id" in reason


@pytest.mark.parametrize("status", [414, 413, 422])
def test_an_unexpected_4xx_for_a_sessions_model_resources_id_fails_naming_it(rig, status):
    rig.control.add_fault(method="GET", path=LOOKUP, status=status, times=10)

    checked = rig.sessions.check({}, {"model_resources_id": SECRET * 5})

    ((field, reason),) = _failures(checked)
    assert field == "model_resources_id" and f"HTTP {status}" in reason and SECRET not in reason
    assert "model_resources_id" in reason.split(". ", 1)[1]  # what to do names the field too


def test_an_unexpected_4xx_for_a_sessions_adopt_id_fails_naming_adopt_id(rig):
    resource = rig.create_resource().id
    rig.control.add_fault(method="GET", path=r"^/v1/rl/training-sessions/[^/]+$", status=414, times=10)

    checked = rig.sessions.check({}, {"model_resources_id": resource, "adopt_id": SECRET * 5})

    ((field, reason),) = _failures(checked)
    assert (
        field == "adopt_id" and "HTTP 414" in reason and "GET /v1/rl/training-sessions/<adopt_id>" in reason
    )
    assert SECRET not in reason


def test_an_unexpected_4xx_from_the_estimate_fails_naming_base_model(rig):
    rig.control.add_fault(method="POST", path=r"/estimate-cost$", status=413, times=10)

    ((field, reason),) = _failures(rig.resources.check({}, {"base_model": MODEL}))

    assert field == "base_model" and "HTTP 413" in reason and "estimate-cost" in reason


@pytest.mark.parametrize("kind", ["resource", "session"])
def test_a_4xx_from_the_supported_models_list_fails_naming_the_field_it_checks(rig, kind):
    rig.control.add_fault(method="GET", path=r"/supported-models$", status=404, times=10)

    if kind == "resource":
        checked, expected = rig.resources.check({}, {"base_model": MODEL}), "base_model"
    else:
        spec = {"base_model": MODEL}
        news = {
            "model_resources_id": UNKNOWN_SENTINEL,
            "lora_config": {"rank": 8},
            "model_resource_spec": spec,
        }
        checked, expected = rig.sessions.check({}, news), "lora_config.rank"

    ((field, reason),) = _failures(checked)
    assert field == expected and "HTTP 404" in reason and "GET /v1/rl/supported-models" in reason
    assert "together:baseUrl" in reason


def test_a_414_for_one_resource_does_not_switch_off_the_checks_of_the_others(rig, capsys):
    rig.control.add_fault(method="GET", path=LOOKUP, status=414, times=1)
    assert [
        f[0] for f in _failures(rig.resources.check({}, {"base_model": MODEL, "adopt_id": "mr-x" * 50}))
    ] == ["adopt_id"]
    rig.control.clear_requests()

    checked = rig.resources.check({}, {"base_model": MODEL, "compute_config": {"num_generator_replicas": 2}})

    assert checked.failures == [] and checked.inputs["price_per_hour"] == 16.5
    assert "Skipped the remote checks" not in capsys.readouterr().err


# ------------------------------------------------------------------------- what is remembered, and where


@pytest.mark.parametrize("status, attempts", [(503, 2), (500, 2), (429, 2), (401, 1), (403, 1)])
def test_an_api_that_refuses_skips_this_check_only(rig, capsys, status, attempts):
    # Every attempt of the first check is refused (the quick client retries 5xx and 429 once, 401/403 never).
    rig.control.add_fault(method="GET", path=r"/supported-models$", status=status, times=attempts)

    first = rig.resources.check({}, {"base_model": MODEL})
    second = rig.resources.check({}, {"base_model": MODEL})

    assert first.failures == [] and "price_per_hour" not in first.inputs  # skipped, with a warning
    warning = capsys.readouterr().err
    assert "Skipped the remote checks" in warning
    # True in whichever command prints it (`pulumi up` too): no promise that a later `pulumi up` checks.
    assert "the next preview or update asks again" in warning and "at `pulumi up`" not in warning
    assert second.failures == [] and second.inputs["price_per_hour"] == 11.0  # asked again, and answered
    assert len(_lookups(rig, "/v1/rl/supported-models")) == attempts + 1


def test_a_host_that_cannot_be_reached_is_remembered_for_the_rest_of_the_preview(rig, capsys):
    rig.control.add_fault(method="GET", path=r"/supported-models$", drop_connection=True, times=2)

    for _ in range(3):
        assert rig.resources.check({}, {"base_model": MODEL}).failures == []

    assert len(_lookups(rig, "/v1/rl/supported-models")) == 2  # the first check's two attempts only
    err = capsys.readouterr().err
    assert err.count("Skipped the remote checks") == 3 and err.count("not asked again for now") == 2


def test_the_memory_is_per_host_not_per_key(rig, capsys):
    rig.control.add_fault(method="GET", path=r"/supported-models$", drop_connection=True, times=2)
    assert rig.resources.check({}, {"base_model": MODEL}).failures == []
    raw = {"together:apiKey": "another-key", "together:baseUrl": rig.emulator.base_url}
    rig.resources.configure(ConfigureRequest(config=Config(raw_config=raw, project_name="test")))
    rig.control.clear_requests()

    assert rig.resources.check({}, {"base_model": MODEL}).failures == []

    assert rig.control.requests() == []  # the same host: not asked again, whatever the key
    assert "not asked again for now" in capsys.readouterr().err


def test_a_host_that_cannot_be_reached_does_not_skip_the_checks_of_another_host(rig, capsys, unused_port):
    raw = {"together:apiKey": "k", "together:baseUrl": f"http://127.0.0.1:{unused_port}"}
    rig.resources.configure(ConfigureRequest(config=Config(raw_config=raw, project_name="test")))
    assert rig.resources.check({}, {"base_model": MODEL}).failures == []
    assert "could not be reached" in capsys.readouterr().err
    raw = {"together:apiKey": rig.emulator.api_key, "together:baseUrl": rig.emulator.base_url}
    rig.resources.configure(ConfigureRequest(config=Config(raw_config=raw, project_name="test")))

    checked = rig.resources.check({}, {"base_model": MODEL})

    assert checked.failures == [] and checked.inputs["price_per_hour"] == 11.0


@pytest.fixture
def unused_port():
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


# ------------------------------------------------------------------------------------ what is printed


def test_what_the_api_says_is_printed_as_one_line(rig, capsys):
    rig.control.add_fault(
        method="GET",
        path=r"/supported-models$",
        status=503,
        message="down\n\x1b[2Jwarning: everything is fine",
        times=2,
    )

    assert rig.resources.check({}, {"base_model": MODEL}).failures == []

    (line,) = [x for x in capsys.readouterr().err.splitlines() if "Skipped the remote checks" in x]
    assert "down\\n\\x1b[2Jwarning: everything is fine" in line and "\x1b" not in line


def test_a_sessions_warning_names_its_adopt_id_by_a_short_form(rig, capsys):
    resource = rig.client.create_model_resource(ModelResourceCreateRequest(base_model=MODEL)).id
    rig.control.add_fault(method="GET", path=r"^/v1/rl/", status=503, times=100)

    news = {"model_resources_id": resource, "adopt_id": SECRET, "display_name": ""}
    assert rig.sessions.check({}, news).failures == []

    err = capsys.readouterr().err
    assert "warning: checking training session (tk-live-…) against the API" in err and SECRET not in err


# ------------------------------------------------------------------------- ids in a failure are short


def test_a_missing_adopt_id_is_quoted_by_its_first_8_characters_only(rig):
    ((field, reason),) = _failures(rig.resources.check({}, {"base_model": MODEL, "adopt_id": SECRET}))

    assert field == "adopt_id" and "no model resource tk-live-… exists" in reason and SECRET not in reason
    assert "GET /v1/rl/model-resources/<adopt_id> answered 404" in reason


def test_a_stopped_model_resources_id_is_quoted_by_its_first_8_characters_only(rig):
    stopped = rig.client.create_model_resource(ModelResourceCreateRequest(base_model=MODEL))
    rig.client.stop_model_resource(stopped.id)

    ((field, reason),) = _failures(rig.sessions.check({}, {"model_resources_id": stopped.id}))

    assert field == "model_resources_id" and f"model resource {stopped.id[:8]}… is STOP" in reason
    assert stopped.id not in reason
