"""Error mapping, configuration (key, base URL) and keeping the API key secret."""

from __future__ import annotations

import logging
import pickle

import httpx
import pytest

from pulumi_together_rl.client import (
    ApiConnectionError,
    ApiError,
    BadRequest,
    ConfigurationError,
    Conflict,
    ModelResourceCreateRequest,
    NotFound,
    PermissionDenied,
    RateLimited,
    ServerError,
    TogetherError,
    TogetherRL,
    TrainingSessionCreateRequest,
    Unauthorized,
)
from pulumi_together_rl.client.errors import MAX_MESSAGE, error_from_response, redact

from .scripted import KEY, Script, error, make_client, page, reply, resource_json


@pytest.mark.parametrize(
    ("status", "kind", "etype", "code", "param"),
    [
        (400, BadRequest, "invalid_request_error", None, "inactive_timeout"),
        (401, Unauthorized, "authentication_error", "invalid_api_key", None),
        (403, PermissionDenied, "permission_denied", None, None),
        (404, NotFound, "not_found", "not_found", None),
        (409, Conflict, "conflict", "sessions_attached", None),
        (422, BadRequest, "invalid_request_error", None, "base_model"),
        (429, RateLimited, "rate_limit_exceeded", "session_cap", None),
        (500, ServerError, "server_error", None, None),
        (503, ServerError, "service_unavailable", None, None),
    ],
)
def test_status_maps_to_one_error_class_carrying_the_envelope(status, kind, etype, code, param):
    script = Script(
        error(
            status, f"message {status}", type=etype, code=code, param=param, headers={"x-request-id": "rq_9"}
        )
    )
    with pytest.raises(kind) as caught:
        make_client(script, max_attempts=1).get_model_resource("mr_1")
    err = caught.value
    assert type(err) is kind
    assert (err.status, err.type, err.code, err.param, err.message) == (
        status,
        etype,
        code,
        param,
        f"message {status}",
    )
    assert (err.method, err.path, err.request_id) == ("GET", "/v1/rl/model-resources/mr_1", "rq_9")
    assert f"HTTP {status}: message {status}" in str(err)


def test_error_without_envelope_keeps_the_text():
    script = Script(httpx.Response(502, text="<html>Bad gateway</html>"))
    with pytest.raises(ServerError) as caught:
        make_client(script, max_attempts=1).list_supported_models()
    assert caught.value.status == 502
    assert "Bad gateway" in caught.value.message
    assert caught.value.type is None


def test_unknown_4xx_is_a_plain_api_error():
    script = Script(error(418, "teapot"))
    with pytest.raises(ApiError) as caught:
        make_client(script).list_supported_models()
    assert type(caught.value) is ApiError
    assert len(script.requests) == 1


# ------------------------------------------------------------------------------------------ API key


def test_missing_key_names_the_argument_and_the_environment_variable(monkeypatch):
    monkeypatch.delenv("TOGETHER_API_KEY", raising=False)
    with pytest.raises(ConfigurationError) as caught:
        TogetherRL(base_url="http://127.0.0.1:1")
    assert "api_key" in str(caught.value)
    assert "TOGETHER_API_KEY" in str(caught.value)


def test_blank_key_in_environment_counts_as_missing(monkeypatch):
    monkeypatch.setenv("TOGETHER_API_KEY", "   ")
    with pytest.raises(ConfigurationError, match="TOGETHER_API_KEY"):
        TogetherRL(base_url="http://127.0.0.1:1")


def test_key_comes_from_environment_and_the_argument_wins(monkeypatch):
    monkeypatch.setenv("TOGETHER_API_KEY", "env-key")
    script = Script(reply(200, {"data": []}), reply(200, {"data": []}))
    transport = httpx.MockTransport(script)
    TogetherRL(base_url="https://api.test", http_transport=transport).list_supported_models()
    TogetherRL(
        api_key="arg-key", base_url="https://api.test", http_transport=transport
    ).list_supported_models()
    assert [r.headers["Authorization"] for r in script.requests] == ["Bearer env-key", "Bearer arg-key"]


def test_key_with_whitespace_is_refused_without_echoing_it():
    with pytest.raises(ConfigurationError) as caught:
        TogetherRL(api_key="abc def-SECRETPART", base_url="https://api.test")
    assert "SECRETPART" not in str(caught.value)


# ----------------------------------------------------------------------------------------- base URL


@pytest.mark.parametrize(
    ("arg", "env", "expected"),
    [
        ("http://arg.example:8080", "http://env.example", "http://arg.example:8080"),
        (None, "http://env.example", "http://env.example"),
        (None, None, "https://api.together.ai"),
        (None, "", "https://api.together.ai"),
        ("https://api.together.ai/v1", None, "https://api.together.ai"),
        ("https://api.together.ai/v1/", None, "https://api.together.ai"),
        ("http://127.0.0.1:4000/", None, "http://127.0.0.1:4000"),
        ("http://proxy.local/together/v1", None, "http://proxy.local/together"),
    ],
)
def test_base_url_precedence_and_trailing_v1(monkeypatch, arg, env, expected):
    if env is None:
        monkeypatch.delenv("TOGETHER_BASE_URL", raising=False)
    else:
        monkeypatch.setenv("TOGETHER_BASE_URL", env)
    script = Script(reply(200, {"data": []}))
    client = TogetherRL(api_key=KEY, base_url=arg, http_transport=httpx.MockTransport(script))
    assert client.base_url == expected
    client.list_supported_models()
    assert str(script.requests[0].url) == f"{expected}/v1/rl/supported-models"


BAD_URLS = [
    "api.together.ai",
    "ftp://x.example",
    "http://",
    "http://[::1",
    "http://h:99999",
    "http://a b.example",
]


@pytest.mark.parametrize("bad", BAD_URLS)
def test_base_url_argument_must_be_a_valid_http_url_and_the_error_names_the_argument(bad):
    with pytest.raises(ConfigurationError, match="TOGETHER_BASE_URL") as caught:
        TogetherRL(api_key=KEY, base_url=bad)
    assert "from the base_url argument" in str(caught.value)
    assert caught.value.__context__ is None


@pytest.mark.parametrize("bad", BAD_URLS)
def test_base_url_from_the_environment_must_be_valid_and_the_error_names_the_variable(monkeypatch, bad):
    monkeypatch.setenv("TOGETHER_BASE_URL", bad)
    with pytest.raises(ConfigurationError) as caught:
        TogetherRL(api_key=KEY)
    assert "from the TOGETHER_BASE_URL environment variable" in str(caught.value)
    assert not isinstance(caught.value, httpx.InvalidURL)


# ---------------------------------------------------------------------------------------- redaction


def test_key_not_in_repr_of_client_or_its_parts():
    client = make_client(Script())
    for text in (repr(client), str(client), repr(client._transport), repr(vars(client._transport))):
        assert KEY not in text
    assert "api.test" in repr(client)


def test_client_cannot_be_pickled_with_its_key():
    with pytest.raises(TypeError):
        pickle.dumps(make_client(Script())._transport._secret)


def test_key_echoed_by_the_server_is_redacted_from_every_error_field():
    script = Script(
        error(
            401,
            f"invalid key {KEY} supplied",
            type=f"auth {KEY}",
            code=f"bad_{KEY}",
            param=KEY,
            headers={"x-request-id": KEY},
        )
    )
    with pytest.raises(Unauthorized) as caught:
        make_client(script).list_supported_models()
    err = caught.value
    for text in (
        str(err),
        repr(err),
        err.message,
        err.type,
        err.code,
        err.param,
        err.request_id,
        *map(str, err.args),
    ):
        assert KEY not in text
    assert "invalid key *** supplied" in err.message


def test_key_echoed_in_a_plain_text_error_body_is_redacted():
    script = Script(httpx.Response(500, text=f"upstream said Authorization: Bearer {KEY}"))
    with pytest.raises(ServerError) as caught:
        make_client(script, max_attempts=1).list_supported_models()
    assert KEY not in str(caught.value)
    assert "Bearer ***" in str(caught.value)


def test_key_in_a_transport_failure_message_is_redacted():
    def explode(request):
        raise httpx.ConnectError(f"cannot connect with {request.headers['Authorization']}", request=request)

    with pytest.raises(ApiConnectionError) as caught:
        make_client(Script(explode), max_attempts=1).list_supported_models()
    assert KEY not in str(caught.value)
    assert KEY not in caught.value.message


def test_ambiguous_create_error_and_logs_never_show_the_key(caplog, capsys):
    script = Script(
        page([]), error(503, f"oops {KEY}"), reply(200, {"data": [], "meta": {"has_more": False}})
    )
    with caplog.at_level(logging.DEBUG), pytest.raises(ServerError) as caught:
        make_client(script, max_attempts=1).create_model_resource(ModelResourceCreateRequest(base_model="m"))
    assert KEY not in str(caught.value)
    assert all(KEY not in r.getMessage() for r in caplog.records)
    out, err = capsys.readouterr()
    assert KEY not in out + err


def test_found_line_on_stderr_never_shows_the_key(capsys):
    script = Script(
        page([]), error(502, f"oops {KEY}"), reply(200, {"data": [resource_json("mr_1")]}), catalog=True
    )
    make_client(script).create_model_resource(ModelResourceCreateRequest(base_model="Qwen/Qwen3.5-4B"))
    err = capsys.readouterr().err
    assert "model resource mr_1: taken as this create's by a match" in err and "oops ***" in err
    assert KEY not in err


def test_a_short_key_is_masked_where_it_is_a_word_never_inside_one():
    assert redact("the key k was checked; key=k, k.", "k") == "the key *** was checked; key=***, ***."
    assert redact("Bearer%20" + KEY + "x", KEY) == "Bearer%20***x"  # a long key: inside a token too


def test_key_straddling_the_message_truncation_point_is_redacted_not_cut():
    """Redact first, then truncate: cutting first would leave the key's prefix behind."""
    message = "x" * (MAX_MESSAGE - 20) + f"bad key {KEY}"
    err = error_from_response(401, {"error": {"message": message, "type": "auth"}}, secret=KEY)
    assert KEY[:12] not in str(err)
    assert err.message.endswith("bad key ***")
    assert len(err.message) <= MAX_MESSAGE


def _reachable(err: BaseException) -> list[object]:
    """Every exception reachable through __cause__/__context__, and every object hanging off one of them."""
    found: list[object] = []
    stack: list[object] = [err]
    seen: set[int] = set()
    while stack:
        obj = stack.pop()
        if obj is None or id(obj) in seen:
            continue
        seen.add(id(obj))
        found.append(obj)
        if isinstance(obj, BaseException):
            stack += [obj.__cause__, obj.__context__, *obj.args, *vars(obj).values()]
            for name in ("request", "_request", "response"):
                try:
                    stack.append(getattr(obj, name, None))
                except RuntimeError:  # httpx raises when no request was attached
                    pass
        elif isinstance(obj, httpx.Response):
            stack.append(obj._request)
    return found


def _assert_no_key_reachable(err: BaseException) -> None:
    for obj in _reachable(err):
        assert not isinstance(obj, httpx.HTTPError), f"httpx exception reachable: {obj!r}"
        if isinstance(obj, httpx.Request):
            assert "authorization" not in obj.headers, f"request with Authorization reachable: {obj!r}"
            assert KEY not in repr(obj.headers)
        assert KEY not in repr(obj) and KEY not in str(obj)


def _explode_with(kind: type[httpx.HTTPError]):
    def explode(request: httpx.Request) -> httpx.Response:
        assert request.headers["Authorization"] == f"Bearer {KEY}"
        raise kind(f"failed ({request.headers['Authorization']})", request=request)

    return explode


@pytest.mark.parametrize(
    "kind", [httpx.ConnectError, httpx.ReadTimeout, httpx.RemoteProtocolError, httpx.DecodingError]
)
def test_no_request_with_the_key_is_reachable_from_a_transport_failure(kind):
    with pytest.raises(TogetherError) as caught:
        make_client(Script(_explode_with(kind)), max_attempts=1).get_model_resource("mr_1")
    _assert_no_key_reachable(caught.value)


def test_no_request_with_the_key_is_reachable_after_retries():
    script = Script(*[_explode_with(httpx.ReadError)] * 3)
    with pytest.raises(ApiConnectionError) as caught:
        make_client(script, max_attempts=3).list_supported_models()
    _assert_no_key_reachable(caught.value)


@pytest.mark.parametrize("kind", [httpx.ReadTimeout, httpx.RemoteProtocolError])
def test_no_request_with_the_key_is_reachable_from_an_unanswered_create(kind):
    script = Script(page([]), _explode_with(kind), _explode_with(httpx.ConnectError))
    with pytest.raises(TogetherError) as caught:
        make_client(script, max_attempts=1, settle_window=0).create_model_resource(
            ModelResourceCreateRequest(base_model="m")
        )
    assert "looking for it failed" in str(caught.value)
    _assert_no_key_reachable(caught.value)


def test_no_request_with_the_key_is_reachable_from_a_failed_snapshot_or_a_bad_body():
    with pytest.raises(TogetherError) as caught:
        make_client(Script(_explode_with(httpx.ConnectError)), max_attempts=1).create_training_session(
            TrainingSessionCreateRequest(model_resources_id="mr_1")
        )
    assert "nothing was sent" in str(caught.value)
    _assert_no_key_reachable(caught.value)
    with pytest.raises(ApiError) as caught:
        make_client(Script(reply(200, {"id": KEY}))).get_model_resource("mr_1")
    _assert_no_key_reachable(caught.value)


def test_server_errors_carry_no_context_at_all():
    with pytest.raises(ServerError) as caught:
        make_client(Script(error(500, f"echo {KEY}")), max_attempts=1).get_model_resource("mr_1")
    assert caught.value.__context__ is None and caught.value.__cause__ is None
    _assert_no_key_reachable(caught.value)
