"""explain(): every error a user sees has a cause that keeps the API's words and a "what to do"."""

from __future__ import annotations

from datetime import datetime, timezone
from types import SimpleNamespace

import pytest

from pulumi_together_rl.client import errors
from pulumi_together_rl.client.models import TrainingSession
from pulumi_together_rl.messages import UserError, WaitFailed, WaitTimeout, explain, log, printable


def _failed_session(error):
    now = datetime.now(timezone.utc).isoformat()
    return TrainingSession.model_validate(
        {
            "id": "ts-1",
            "status": "TRAINING_SESSION_STATUS_ERROR",
            "model_resources_id": "mr-1",
            "created_by": "u",
            "created_at": now,
            "updated_at": now,
            "error": error,
        }
    )


def test_the_api_message_is_kept_when_the_error_has_no_code():
    exc = WaitFailed(
        last=_failed_session({"message": "CUDA out of memory on trainer"}),
        description="training session ts-1: ERROR",
        elapsed=3.0,
    )
    cause, todo = explain(exc, "creating")
    assert "CUDA out of memory" in cause
    assert "Fix the cause the API's error gives" in todo


def test_the_api_code_and_message_are_both_kept():
    exc = WaitFailed(
        last=_failed_session({"code": "TRAINING_SESSION_ERROR_CODE_SESSION_FAILED", "message": "boom"}),
        description="training session ts-1: ERROR",
        elapsed=3.0,
    )
    cause, _ = explain(exc)
    assert "TRAINING_SESSION_ERROR_CODE_SESSION_FAILED" in cause and "boom" in cause


def test_timeouts_say_which_timeout_to_raise():
    exc = WaitTimeout(last=SimpleNamespace(), description="model resource x: PENDING", elapsed=9, timeout=9)
    assert "create_timeout" in explain(exc, "creating")[1]
    assert "create_timeout" in explain(exc, "adopting")[1]
    assert "delete_timeout" in explain(exc, "deleting")[1]


def test_an_adopt_of_a_missing_object_says_to_check_adopt_id():
    _, todo = explain(errors.NotFound(404, "no such resource"), "adopting")
    assert "adopt_id" in todo


@pytest.mark.parametrize(
    "exc",
    [
        errors.Unauthorized(401, "bad key"),
        errors.PermissionDenied(403, "no"),
        errors.RateLimited(429, "slow down"),
        errors.BadRequest(400, "bad", param="x"),
        errors.NotFound(404, "gone"),
        errors.Conflict(409, "busy"),
        errors.ServerError(503, "down"),
        errors.ApiError(418, "teapot"),
        errors.ApiConnectionError("refused"),
        errors.ApiTimeout("read timeout"),
        errors.ConfigurationError("client closed"),
        WaitFailed(last=None, description="model resource x: not found", elapsed=60),
        WaitTimeout(last=None, description="model resource x: not found", elapsed=5, timeout=5),
        UserError("creating", "model resource", "x", "it broke"),
        RuntimeError("unexpected"),
    ],
)
def test_every_error_says_what_to_do(exc):
    for doing in ("", "creating", "adopting", "deleting"):
        cause, todo = explain(exc, doing)
        assert cause and todo, (type(exc).__name__, doing)


def test_a_create_that_may_have_happened_says_to_look_before_running_up_again():
    exc = errors.ApiTimeout(
        "read timed out. Creating the model resource may have succeeded anyway. List your model resources",
        method="POST",
        path="/v1/rl/model-resources",
        maybe_sent=True,
    )
    exc.maybe_created = True
    cause, todo = explain(exc, "creating")
    assert "may have succeeded" in cause
    assert "Before running `pulumi up` again" in todo and "adopt_id" in todo
    # An ordinary timeout keeps the ordinary advice.
    plain = errors.ApiTimeout("read timed out", method="GET", path="/v1/rl/model-resources/x")
    assert "adopt_id" not in explain(plain, "creating")[1]


# ------------------------------------------------------------------------------------- printable, log


@pytest.mark.parametrize(
    "raw, shown",
    [
        ("a\x1b[31mred\x1b[0m", "a\\x1b[31mred\\x1b[0m"),
        ("one\ntwo\r\n", "one\\ntwo\\r\\n"),
        ("tab\there", "tab\\there"),
        ("nul\x00", "nul\\x00"),
        ("del\x7f c1\x85\x9b", "del\\x7f c1\\x85\\x9b"),
        ("sep\u2028par\u2029", "sep\\u2028par\\u2029"),
        ("Lauf für gsm8k — ε ✓ …", "Lauf für gsm8k — ε ✓ …"),  # ordinary text is left alone
    ],
)
def test_printable_escapes_control_characters_visibly(raw, shown):
    assert printable(raw) == shown


def test_printable_shortens_over_long_text_to_the_limit():
    assert printable("x" * 200) == "x" * 200
    short = printable("x" * 201)
    assert len(short) == 200 and short == "x" * 199 + "…"
    assert printable("abcdef", limit=4) == "abc…"
    # An escape is never cut in two: either all of "\x1b" is shown or none of it.
    cut = printable("ab\x1b", limit=4)
    assert cut == "ab…" and len(cut) <= 4


def test_log_writes_one_line_whatever_the_message_holds(capsys):
    log("model resource (Evil\n\x1b[2Jwarning: fake line): estimated 1.00 USD/h")

    err = capsys.readouterr().err
    assert err == "model resource (Evil\\n\\x1b[2Jwarning: fake line): estimated 1.00 USD/h\n"


def test_log_shortens_an_over_long_line(capsys):
    log("training session (" + "n" * 5000 + "): created")

    err = capsys.readouterr().err
    assert err.count("\n") == 1 and len(err) <= 1001 and err.endswith("…\n")


def test_a_404_for_a_collection_blames_the_base_url_not_the_objects():
    """A list or create answered 404: the endpoint is wrong (a moved base URL), not every object gone."""
    from pulumi_together_rl.client.errors import NotFound

    cause, todo = explain(NotFound(404, "no such route", method="GET", path="/v1/rl/model-resources"))
    assert "is not the Together RL API" in cause and "/v1/rl/model-resources" in cause
    assert "pulumi refresh` to drop" not in todo and "base" in todo.lower()
    cause, todo = explain(NotFound(404, "not found", method="GET", path="/v1/rl/model-resources/mr_1"))
    assert "pulumi refresh" in todo  # one object: it may be gone


def test_a_command_is_told_the_way_it_runs_where_the_user_is(tmp_path, monkeypatch):
    """In a uv project `python` is not the project's: lines say `uv run python -m ...`; in another venv, that
    venv's Python (relative when below the working folder); with no venv, `python -m ...`."""
    import sys

    from pulumi_together_rl.messages import command

    uv_venv, pip_venv = tmp_path / "project" / ".venv", tmp_path / "project" / "venv"
    for venv, cfg in ((uv_venv, "home = /usr/bin\nuv = 0.13.9\n"), (pip_venv, "home = /usr/bin\n")):
        venv.mkdir(parents=True)
        (venv / "pyvenv.cfg").write_text(cfg)
    monkeypatch.chdir(tmp_path / "project")
    monkeypatch.setattr(sys, "base_prefix", "/usr")
    monkeypatch.setattr(sys, "prefix", str(uv_venv))
    assert command("recover --stack dev") == "uv run python -m pulumi_together_rl recover --stack dev"
    monkeypatch.setattr(sys, "prefix", str(pip_venv))
    assert command("journal list") == "venv/bin/python -m pulumi_together_rl journal list"
    monkeypatch.setattr(sys, "prefix", str(tmp_path / "elsewhere"))  # not below the working folder
    assert command("orphans") == f"{tmp_path / 'elsewhere' / 'bin' / 'python'} -m pulumi_together_rl orphans"
    monkeypatch.setattr(sys, "prefix", "/usr")
    assert command("orphans") == "python -m pulumi_together_rl orphans"
