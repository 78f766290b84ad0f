"""Transport behaviour against scripted HTTP: retries, backoff, Retry-After, attempts, failure mapping."""

from __future__ import annotations

import email.utils
import logging
import sys
from datetime import timedelta

import httpx
import pytest

import pulumi_together_rl
from pulumi_together_rl.client import (
    ApiConnectionError,
    ApiTimeout,
    BadRequest,
    Conflict,
    NotFound,
    RateLimited,
    ServerError,
    TogetherError,
    TrainingSessionUpdateRequest,
)
from pulumi_together_rl.client.transport import parse_retry_after

from .scripted import BASE, KEY, Script, Sleeps, error, make_client, now, reply, resource_json, session_json


def test_get_is_retried_after_503_and_then_succeeds():
    script = Script(error(503), reply(200, resource_json("mr_7")))
    sleeps = Sleeps()
    got = make_client(script, sleeps=sleeps).get_model_resource("mr_7")
    assert got.id == "mr_7"
    assert script.calls() == ["GET /v1/rl/model-resources/mr_7"] * 2
    assert sleeps == [0.5]


def test_attempts_are_bounded_to_five_by_default():
    script = Script(*[error(500, "down")] * 5)
    sleeps = Sleeps()
    with pytest.raises(ServerError) as caught:
        make_client(script, sleeps=sleeps).get_model_resource("mr_1")
    assert len(script.requests) == 5
    assert len(sleeps) == 4
    assert caught.value.status == 500


def test_max_attempts_one_means_no_retry():
    script = Script(error(503))
    sleeps = Sleeps()
    with pytest.raises(ServerError):
        make_client(script, sleeps=sleeps, max_attempts=1).list_supported_models()
    assert len(script.requests) == 1
    assert sleeps == []


def test_backoff_is_exponential_and_capped_with_full_jitter_upper_bound():
    script = Script(*[error(502)] * 8)
    sleeps = Sleeps()
    with pytest.raises(ServerError):
        make_client(script, sleeps=sleeps, rng=lambda: 1.0, max_attempts=8).get_model_resource("mr_1")
    # rng() == 1.0 gives the ceiling of each full-jitter window: base 0.5 s doubling, capped at 8 s.
    assert sleeps == [0.5, 1.0, 2.0, 4.0, 8.0, 8.0, 8.0]


@pytest.mark.parametrize("draw", [0.0, 0.25, 0.999])
def test_backoff_delay_is_the_rng_draw_times_the_window(draw):
    script = Script(*[error(503)] * 4)
    sleeps = Sleeps()
    with pytest.raises(ServerError):
        make_client(script, sleeps=sleeps, rng=lambda: draw, max_attempts=4).get_model_resource("mr_1")
    assert sleeps == pytest.approx([draw * 0.5, draw * 1.0, draw * 2.0])


def test_retry_after_seconds_is_honoured_instead_of_backoff():
    script = Script(error(429, headers={"Retry-After": "7"}), reply(200, {"data": []}))
    sleeps = Sleeps()
    make_client(script, sleeps=sleeps).list_supported_models()
    assert sleeps == [7.0]


def test_retry_after_http_date_is_honoured():
    when = email.utils.format_datetime(now() + timedelta(seconds=30), usegmt=True)
    script = Script(error(503, headers={"Retry-After": when}), reply(200, {"data": []}))
    sleeps = Sleeps()
    make_client(script, sleeps=sleeps).list_supported_models()
    assert len(sleeps) == 1
    assert 28.0 <= sleeps[0] <= 30.0


@pytest.mark.parametrize(
    ("header", "value"),
    [
        ("Retry-After", "3600"),
        ("Retry-After", "Fri, 01 Jan 2100 00:00:00 GMT"),
        ("retry-after-ms", "900000"),
    ],
)
def test_retry_after_is_capped_at_sixty_seconds(header, value):
    script = Script(error(429, headers={header: value}), reply(200, {"data": []}))
    sleeps = Sleeps()
    make_client(script, sleeps=sleeps).list_supported_models()
    assert sleeps == [60.0]


def test_retry_after_cap_is_configurable():
    script = Script(error(429, headers={"Retry-After": "30"}), reply(200, {"data": []}))
    sleeps = Sleeps()
    make_client(script, sleeps=sleeps, max_retry_after=5).list_supported_models()
    assert sleeps == [5.0]


def test_retry_after_ms_wins_over_retry_after():
    script = Script(
        error(429, headers={"retry-after-ms": "250", "Retry-After": "9"}), reply(200, {"data": []})
    )
    sleeps = Sleeps()
    make_client(script, sleeps=sleeps).list_supported_models()
    assert sleeps == [0.25]


def test_retry_after_carried_on_the_final_error():
    script = Script(*[error(429, "slow down", headers={"Retry-After": "3"})] * 2)
    with pytest.raises(RateLimited) as caught:
        make_client(script, max_attempts=2).list_supported_models()
    assert caught.value.retry_after == 3.0


@pytest.mark.parametrize(
    ("headers", "expected"),
    [
        ({}, None),
        ({"Retry-After": "garbage"}, None),
        ({"Retry-After": "-5"}, 0.0),
        ({"Retry-After": "1.5"}, 1.5),
        ({"Retry-After": "Thu, 01 Jan 1970 00:00:00 GMT"}, 0.0),
        ({"retry-after-ms": "nope", "Retry-After": "2"}, 2.0),
    ],
)
def test_parse_retry_after_edge_cases(headers, expected):
    assert parse_retry_after(httpx.Headers(headers)) == expected


def test_parse_retry_after_date_is_relative_to_now():
    headers = httpx.Headers({"Retry-After": "Thu, 01 Jan 2026 00:01:00 GMT"})
    start = email.utils.parsedate_to_datetime("Thu, 01 Jan 2026 00:00:00 GMT").timestamp()
    assert parse_retry_after(headers, now=start) == 60.0


@pytest.mark.parametrize(
    ("failure", "kind", "maybe_sent"),
    [
        (httpx.ConnectError, ApiConnectionError, False),
        (httpx.ConnectTimeout, ApiTimeout, False),
        (httpx.PoolTimeout, ApiTimeout, False),
        (httpx.ReadTimeout, ApiTimeout, True),
        (httpx.WriteTimeout, ApiTimeout, True),
        (httpx.RemoteProtocolError, ApiConnectionError, True),
        (httpx.ReadError, ApiConnectionError, True),
        (httpx.WriteError, ApiConnectionError, True),
    ],
)
def test_transport_failures_become_our_errors_with_maybe_sent(failure, kind, maybe_sent):
    script = Script(failure)
    with pytest.raises(kind) as caught:
        make_client(script, max_attempts=1).get_model_resource("mr_1")
    err = caught.value
    assert type(err) is kind
    assert err.maybe_sent is maybe_sent
    assert failure.__name__ in str(err)
    assert "GET /v1/rl/model-resources/mr_1" in str(err)
    # Resources never see httpx: nothing httpx is raised, chained or kept as context.
    assert not isinstance(err, httpx.HTTPError)
    assert err.__cause__ is None
    assert err.__context__ is None


def test_bad_content_encoding_is_our_error_and_is_retried_for_a_get():
    def garbled(request):
        return httpx.Response(200, headers={"content-encoding": "gzip"}, content=b"not gzip at all")

    script = Script(garbled, reply(200, resource_json("mr_1")))
    assert make_client(script).get_model_resource("mr_1").id == "mr_1"
    script = Script(garbled)
    with pytest.raises(ApiConnectionError) as caught:
        make_client(script, max_attempts=1).get_model_resource("mr_1")
    assert "could not be decoded" in str(caught.value)
    assert caught.value.maybe_sent is True
    assert caught.value.__context__ is None


@pytest.mark.parametrize("failure", [httpx.TooManyRedirects, httpx.InvalidURL], ids=lambda f: f.__name__)
def test_other_httpx_exceptions_never_escape(failure):
    def explode(request):
        if failure is httpx.TooManyRedirects:
            raise failure("too many", request=request)
        raise failure("odd")

    with pytest.raises(TogetherError) as caught:
        make_client(Script(explode), max_attempts=1).get_model_resource("mr_1")
    assert not isinstance(caught.value, httpx.HTTPError)
    assert failure.__name__ in str(caught.value)


@pytest.mark.parametrize("failure", [httpx.ConnectError, httpx.ReadTimeout, httpx.RemoteProtocolError])
def test_idempotent_calls_retry_transport_failures(failure):
    script = Script(failure, failure, reply(200, resource_json("mr_1")))
    sleeps = Sleeps()
    assert make_client(script, sleeps=sleeps).get_model_resource("mr_1").id == "mr_1"
    assert len(script.requests) == 3
    assert sleeps == [0.5, 1.0]


def test_unusable_request_is_not_retried():
    script = Script(httpx.UnsupportedProtocol)
    sleeps = Sleeps()
    with pytest.raises(ApiConnectionError):
        make_client(script, sleeps=sleeps).get_model_resource("mr_1")
    assert len(script.requests) == 1
    assert sleeps == []


@pytest.mark.parametrize(("status", "kind"), [(400, BadRequest), (404, NotFound), (409, Conflict)])
def test_client_errors_are_not_retried(status, kind):
    script = Script(error(status))
    sleeps = Sleeps()
    with pytest.raises(kind):
        make_client(script, sleeps=sleeps).get_model_resource("mr_1")
    assert len(script.requests) == 1
    assert sleeps == []


def test_stop_is_retried_after_a_server_error():
    script = Script(error(500), reply(200, resource_json("mr_1", status="MODEL_RESOURCES_STATUS_STOPPING")))
    got = make_client(script).stop_model_resource("mr_1")
    assert got.status.short == "STOPPING"
    assert script.calls() == ["POST /v1/rl/model-resources/mr_1/stop"] * 2


def test_session_stop_and_patch_are_retried_after_read_timeouts():
    script = Script(
        httpx.ReadTimeout,
        reply(200, session_json("ts_1", status="TRAINING_SESSION_STATUS_STOPPING")),
        httpx.ReadTimeout,
        reply(200, session_json("ts_1", display_name="x")),
    )
    client = make_client(script)
    assert client.stop_training_session("ts_1").status.short == "STOPPING"
    assert (
        client.update_training_session("ts_1", TrainingSessionUpdateRequest(display_name="x")).display_name
        == "x"
    )
    assert script.calls() == [
        "POST /v1/rl/training-sessions/ts_1/stop",
        "POST /v1/rl/training-sessions/ts_1/stop",
        "PATCH /v1/rl/training-sessions/ts_1",
        "PATCH /v1/rl/training-sessions/ts_1",
    ]


def test_every_request_carries_auth_user_agent_and_timeouts():
    script = Script(reply(200, {"data": []}))
    make_client(script).list_supported_models()
    request = script.requests[0]
    assert request.headers["Authorization"] == f"Bearer {KEY}"
    major, minor = sys.version_info[:2]
    assert request.headers["User-Agent"] == (
        f"pulumi-together-rl/{pulumi_together_rl.__version__} (python {major}.{minor}; httpx {httpx.__version__})"
    )
    assert request.extensions["timeout"] == {"connect": 10.0, "read": 60.0, "write": 60.0, "pool": 60.0}
    assert str(request.url) == f"{BASE}/v1/rl/supported-models"


def test_timeout_argument_sets_read_timeout_and_caps_connect():
    script = Script(reply(200, {"data": []}), reply(200, {"data": []}))
    make_client(script, timeout=5).list_supported_models()
    make_client(script, timeout=120).list_supported_models()
    assert script.requests[0].extensions["timeout"]["read"] == 5.0
    assert script.requests[0].extensions["timeout"]["connect"] == 5.0
    assert script.requests[1].extensions["timeout"]["read"] == 120.0
    assert script.requests[1].extensions["timeout"]["connect"] == 10.0


def test_retries_are_logged_without_the_key(caplog):
    script = Script(error(503, f"bad key {KEY}"), reply(200, resource_json("mr_1")))
    with caplog.at_level(logging.DEBUG):
        make_client(script).get_model_resource("mr_1")
    retry_lines = [r.getMessage() for r in caplog.records if r.name == "pulumi_together_rl.client"]
    assert len(retry_lines) == 1
    assert "retrying in 0.50 s (attempt 2 of 5)" in retry_lines[0]
    assert all(KEY not in r.getMessage() for r in caplog.records)


def test_non_json_success_body_is_an_api_error_not_a_crash():
    script = Script(httpx.Response(200, text="<html>ok</html>"))
    with pytest.raises(Exception) as caught:
        make_client(script).get_model_resource("mr_1")
    assert type(caught.value).__name__ == "ApiError"
    assert "not JSON" in str(caught.value)


def test_unexpected_success_shape_is_an_api_error_naming_the_field():
    script = Script(reply(200, {"id": "mr_1"}))
    with pytest.raises(Exception) as caught:
        make_client(script).get_model_resource("mr_1")
    assert type(caught.value).__name__ == "ApiError"
    assert "unexpected response body" in str(caught.value)
