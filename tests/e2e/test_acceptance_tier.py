"""``make acceptance``, the opt-in live tier (docs/releasing.md), through the real command: its gate, its ceiling,
and the whole run (sweeps, tests, ledger) against the emulator, so the tier itself is tested on every CI run.

What this does not show: that the real Together API behaves as the emulator does. That is what the tier is for,
and only a maintainer with a key can run it (``TOGETHER_RL_ACC=1 make acceptance``).

The emulator is this worker's (the ``emulator`` fixture), its lifecycle slowed down for the run (a model resource
is PENDING for 3 s, so the plan's pre-READY window, 1 s here, ends before READY, as the real API's queue and model
load take far longer than its default 20 s) and its ``created_by=me`` user's key the run's key.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from pulumi_together_rl.client import TogetherRL
from pulumi_together_rl.client.models import ModelResourceCreateRequest, TrainingSessionCreateRequest

pytestmark = [pytest.mark.release, pytest.mark.timeout(600)]  # the release tier (make test-release)

ROOT = Path(__file__).resolve().parents[2]
MODEL = "Qwen/Qwen3.5-4B"
RUN_TIMINGS = {
    "resource_pending": 3.0,
    "resource_creating": 1.0,
    "resource_stopping": 0.5,
    "session_creating": 0.5,
    "session_stopping": 0.5,
}
INSTANT = dict.fromkeys(RUN_TIMINGS, 0.0)
OLD_RUN = "20200101-000000-0a0a0a"  # a run long over, known to the ledger
GONE_MACHINE_RUN = (
    "20200101-000000-0b0b0b"  # a run long over on another machine: only its names say it was one
)


def make_acceptance(emulator, tmp_path: Path, **env: str | None) -> subprocess.CompletedProcess[str]:
    """``make acceptance`` with the emulator's URL and key (``env`` adds to, or with None removes from, that)."""
    base = {k: v for k, v in os.environ.items() if not k.startswith("TOGETHER_")}
    base.update(
        TOGETHER_RL_ACC="1",
        TOGETHER_API_KEY=emulator.api_key,
        TOGETHER_BASE_URL=emulator.base_url,
        TOGETHER_RL_ACC_LEDGER=str(tmp_path / "ledger.jsonl"),
        TOGETHER_RL_ACC_PRE_READY_SECONDS="1",
        TOGETHER_RL_POLL_INTERVAL="0.2",
        TMPDIR=str(tmp_path),
    )
    for key, value in env.items():
        if value is None:
            base.pop(key, None)
        else:
            base[key] = value
    return subprocess.run(
        ["make", "--no-print-directory", "acceptance"],
        cwd=ROOT,
        env=base,
        capture_output=True,
        text=True,
        timeout=540,
        check=False,
    )


def error_lines(result: subprocess.CompletedProcess[str]) -> list[str]:
    return [line for line in result.stderr.splitlines() if line.startswith("error: ")]


def status(emulator, ident: str) -> str:
    state = emulator.control.state()
    found = [o["status"] for o in state["model_resources"] + state["training_sessions"] if o["id"] == ident]
    assert found, ident
    return found[0].rsplit("_STATUS_", 1)[-1]


def stops_of(emulator) -> set[str]:
    return {
        r["path"].split("/")[-2]
        for r in emulator.control.requests()
        if r["method"] == "POST" and r["path"].endswith("/stop")
    }


def ledger_lines(tmp_path: Path) -> list[dict]:
    path = tmp_path / "ledger.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


# ------------------------------------------------------------------------------------------------ refusals


def test_it_refuses_without_TOGETHER_RL_ACC_1(emulator, tmp_path):
    # (TOGETHER_RL_ACC set to anything but 1, and both missing: tests/unit/test_acceptance_rules.py)
    result = make_acceptance(emulator, tmp_path, TOGETHER_RL_ACC=None)

    assert result.returncode != 0
    assert error_lines(result) == [
        "error: starting the acceptance tests: TOGETHER_RL_ACC is not set. They create billed objects in the Together account of "
        "the key, so they run only with TOGETHER_RL_ACC=1 and TOGETHER_API_KEY set to that account's key "
        "(docs/releasing.md)."
    ], result.stderr
    assert "acceptance run" not in result.stdout  # it never started
    assert emulator.control.requests() == []  # nothing was asked of the API
    assert not (tmp_path / "ledger.jsonl").exists()


def test_it_refuses_without_a_key(emulator, tmp_path):
    result = make_acceptance(emulator, tmp_path, TOGETHER_API_KEY=None)

    assert result.returncode != 0
    assert error_lines(result) == [
        "error: starting the acceptance tests: TOGETHER_API_KEY is not set. They create billed objects in the "
        "Together account of the key, so they run only with TOGETHER_RL_ACC=1 and TOGETHER_API_KEY set to that "
        "account's key (docs/releasing.md)."
    ], result.stderr
    assert emulator.control.requests() == []
    assert not (tmp_path / "ledger.jsonl").exists()


def test_it_refuses_a_plan_above_its_ceiling_before_creating_anything(emulator, tmp_path):
    result = make_acceptance(emulator, tmp_path, TOGETHER_RL_ACC_MAX_USD="1.25")

    assert result.returncode != 0, result.stdout + result.stderr
    # The emulator's price (one B200 for a trainer-only LoRA resource, 5.50 USD/h) times what each step may bill:
    # its READY time (the pre-READY window 1 s; the READY step's 30 s listing + 10 s poll + 240 s), 30 s to stop and
    # 300 s of inactive_timeout.
    [line] = error_lines(result)
    assert re.fullmatch(
        r"error: starting acceptance run \(\d{8}-\d{6}-[0-9a-f]{6}\): its plan may cost up to 1\.44 USD "
        r"\(pre-READY create 5\.50 USD/h x 331 s = 0\.51 USD; READY step 5\.50 USD/h x 610 s = 0\.93 USD; READY "
        r"time plus 30 s to stop and 300 s of inactive_timeout each\), above TOGETHER_RL_ACC_MAX_USD=1\.25 USD\. "
        r"Nothing was created; set TOGETHER_RL_ACC_MAX_USD to 1\.44 or more to run it\.",
        line,
    ), line
    asked = [(r["method"], r["path"]) for r in emulator.control.requests()]
    assert asked == [("POST", "/v1/rl/model-resources/estimate-cost")], asked  # priced, nothing made
    assert not (tmp_path / "ledger.jsonl").exists()


# ---------------------------------------------------------------------------------------------- whole runs


def plant_leftovers(emulator, tmp_path: Path) -> dict[str, str]:
    """What earlier runs and other people left in the account, before the run: the ids by role."""
    control = emulator.control
    control.configure(timings=INSTANT)
    made: dict[str, str] = {}
    with TogetherRL(api_key=emulator.api_key, base_url=emulator.base_url) as client:

        def resource() -> str:
            ident = client.create_model_resource(ModelResourceCreateRequest(base_model=MODEL)).id
            client.get_model_resource(ident)  # the next request sees it READY (instant timings)
            return ident

        def session(on: str, name: str) -> str:
            return client.create_training_session(
                TrainingSessionCreateRequest(model_resources_id=on, display_name=name)
            ).id

        made["old run's resource"] = resource()  # in the ledger as a finished run's: stopped
        made["someone's resource"] = resource()  # no proof: untouched
        made["gone machine's session"] = session(made["someone's resource"], f"acc-{GONE_MACHINE_RUN}-trial")
        recent = (datetime.now(timezone.utc) - timedelta(minutes=10)).strftime("%Y%m%d-%H%M%S")
        made["running run's session"] = session(made["someone's resource"], f"acc-{recent}-0c0c0c-trial")
        made["look-alike session"] = session(made["someone's resource"], "acc-notes")
        control.configure(user_id="user_colleague")  # the same account, another user
        made["colleague's resource"] = resource()
        made["colleague's named session"] = session(made["colleague's resource"], f"acc-{OLD_RUN}-trial")
        control.configure(user_id="user_emulator")
    old = {"run": OLD_RUN, "base_url": emulator.base_url}
    with open(tmp_path / "ledger.jsonl", "w") as ledger:
        for line in (
            {**old, "event": "start", "at": "2020-01-01T00:00:00Z", "deadline": "2020-01-01T01:00:00Z"},
            {**old, "event": "created", "kind": "model resource", "id": made["old run's resource"]},
            {**old, "event": "created", "kind": "model resource", "id": made["colleague's resource"]},
        ):
            ledger.write(json.dumps(line) + "\n")
    control.configure(timings=RUN_TIMINGS)
    control.clear_requests()
    return made


def test_make_acceptance_runs_the_tier_against_the_emulator_and_leaves_nothing(emulator, tmp_path):
    planted = plant_leftovers(emulator, tmp_path)
    started = time.monotonic()

    result = make_acceptance(emulator, tmp_path)
    took = time.monotonic() - started

    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    assert "2 passed" in output and "skipped" not in output, output
    run = re.search(r"^acceptance run (\d{8}-\d{6}-[0-9a-f]{6}) against ", result.stdout, re.M)
    assert run, output
    run_id = run.group(1)
    assert "plan: pre-READY create 5.50 USD/h x 331 s = 0.51 USD; READY step" in result.stdout
    assert "within TOGETHER_RL_ACC_MAX_USD=2.00 USD" in result.stdout

    # The sweep before: earlier, finished runs' objects by the ledger or the name, made by the key's user.
    assert (
        "sweep before: stopped 2, left 1, failed 0; 2 other active objects of this user are not the tier's"
        in (result.stdout)
    ), output
    for role in ("old run's resource", "gone machine's session"):
        assert (
            f"  stopped {'model resource' if 'resource' in role else 'training session'} {planted[role]}: "
            in (result.stdout)
        ), (role, output)
        assert status(emulator, planted[role]) in ("STOPPING", "STOPPED"), role
    running = planted["running run's session"]
    assert f"  left training session {running}: named " in result.stdout
    assert "may still be running until" in result.stdout
    for role in ("someone's resource", "running run's session", "look-alike session", "colleague's resource",
                 "colleague's named session"):  # fmt: skip
        assert status(emulator, planted[role]) in ("READY", "RUNNING"), role
        assert planted[role] not in stops_of(emulator), role  # never even asked to stop

    # The run's own objects: in the ledger, each ended; the session carried the run's prefix to the end.
    ledger = ledger_lines(tmp_path)
    ours = [line for line in ledger if line["run"] == run_id]
    assert [line["event"] for line in ours] == ["start", "created", "created", "created", "end"], ours
    made = [(line["kind"], line["id"]) for line in ours if line["event"] == "created"]
    assert [kind for kind, _ in made] == ["model resource", "model resource", "training session"]
    for kind, ident in made:
        assert status(emulator, ident) in (
            ("STOPPING", "STOPPED") if kind == "model resource" else ("STOPPED",)
        )
    session = next(s for s in emulator.control.state()["training_sessions"] if s["id"] == made[2][1])
    assert session["display_name"] == f"acc-{run_id}-renamed", session
    assert "sweep after: nothing of this run is left active (3 objects of this run checked)" in result.stdout
    posts = [r["path"] for r in emulator.control.requests() if r["method"] == "POST"]
    assert posts.count("/v1/rl/model-resources") == 2 and posts.count("/v1/rl/training-sessions") == 1, posts

    # The key is in no output and no file the run wrote.
    assert emulator.api_key not in output
    assert emulator.api_key not in (tmp_path / "ledger.jsonl").read_text()
    assert not list(tmp_path.glob("together-rl-acceptance-*")), "the run's work folder is left"
    print(f"make acceptance against the emulator: {took:.1f} s")


def test_a_failing_acceptance_test_still_stops_everything_it_made(emulator, tmp_path):
    emulator.control.configure(timings=RUN_TIMINGS)
    # The session the READY step starts ends in ERROR: the test fails with its model resource READY.
    emulator.control.fail_next("training_session", "TRAINING_SESSION_ERROR_CODE_RESOURCE_UNAVAILABLE")

    result = make_acceptance(emulator, tmp_path)

    output = result.stdout + result.stderr
    assert result.returncode != 0, output
    assert "1 failed, 1 passed" in output, output
    assert "TRAINING_SESSION_ERROR_CODE_RESOURCE_UNAVAILABLE" in output
    # The failed test's clean-up stopped its READY resource: the sweep after found nothing of the run active.
    assert "sweep after: nothing of this run is left active (3 objects of this run checked)" in result.stdout
    state = emulator.control.state()
    assert len(state["model_resources"]) == 2, state["model_resources"]
    assert all(r["status"].endswith(("STOPPING", "STOPPED")) for r in state["model_resources"]), state
    assert all(s["status"].endswith(("STOPPED", "ERROR")) for s in state["training_sessions"]), state
    assert emulator.api_key not in output
