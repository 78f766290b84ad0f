"""The acceptance tier's rules (harness/acceptance.py): its gate, settings, ceiling, guard and ledger, and its two
sweeps against the emulator, in this process. The command itself (``make acceptance``) runs in the release tier
(tests/e2e/test_acceptance_tier.py), against the emulator too: nothing here touches the real API.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
from harness import acceptance as acc

from pulumi_together_rl import config
from pulumi_together_rl.client import TogetherRL
from pulumi_together_rl.client.models import ModelResourceCreateRequest, TrainingSessionCreateRequest
from pulumi_together_rl.resources import process

MODEL = "Qwen/Qwen3.5-4B"
NOW = datetime(2026, 6, 1, 12, 0, 0, tzinfo=timezone.utc)


def settings(tmp_path: Path, **env: str) -> acc.Settings:
    return acc.Settings.from_env({acc.ENV_LEDGER: str(tmp_path / "ledger.jsonl"), **env})


# ------------------------------------------------------------------------------------ gate and settings


@pytest.mark.parametrize(
    ("env", "missing"),
    [
        ({}, "TOGETHER_RL_ACC is not set and TOGETHER_API_KEY is not set"),
        ({"TOGETHER_RL_ACC": "1"}, "TOGETHER_API_KEY is not set"),
        ({"TOGETHER_RL_ACC": "1", "TOGETHER_API_KEY": "  "}, "TOGETHER_API_KEY is not set"),
        ({"TOGETHER_RL_ACC": "true", "TOGETHER_API_KEY": "k"}, "TOGETHER_RL_ACC is 'true', not 1"),
        ({"TOGETHER_API_KEY": "k"}, "TOGETHER_RL_ACC is not set"),
    ],
)
def test_the_gate_names_what_is_missing_in_one_sentence(env, missing):
    refusal = acc.gate_refusal(env)
    assert refusal is not None and refusal.startswith(f"starting the acceptance tests: {missing}. ")
    assert refusal.count(". ") == 1 and refusal.endswith("(docs/releasing.md).")


def test_the_gate_opens_with_both():
    assert acc.gate_refusal({"TOGETHER_RL_ACC": "1", "TOGETHER_API_KEY": "k"}) is None


def test_a_setting_that_is_not_a_number_in_range_is_one_sentence(tmp_path):
    with pytest.raises(acc.SettingError) as raised:
        settings(tmp_path, TOGETHER_RL_ACC_MAX_USD="lots")
    assert str(raised.value) == (
        "starting the acceptance tests: TOGETHER_RL_ACC_MAX_USD is 'lots', not a number from 0 to 1000. Set it to "
        "one, or unset it for the default (2)."
    )
    with pytest.raises(acc.SettingError):
        settings(tmp_path, TOGETHER_RL_ACC_PRE_READY_SECONDS="nan")
    assert settings(tmp_path).max_usd == 2.0 and settings(tmp_path).model == MODEL


# ----------------------------------------------------------------------------------------------- the ceiling


def test_the_plan_is_priced_for_the_longest_each_resource_may_bill(tmp_path):
    plan = acc.Plan(settings(tmp_path))
    asked = []

    def estimate(body):
        asked.append(body)
        return 5.5, "USD"

    priced = acc.price(estimate, plan)

    assert asked == [
        {
            "base_model": MODEL,
            "compute_config": {"num_generator_replicas": 0},
            "inactive_timeout": 300,
            "lora_enabled": True,
        }
    ]
    # pre-READY: its 20 s window + 30 s stop + 300 s inactive_timeout; READY step: 30 s listed + 10 s poll + 240 s
    # READY + 30 s + 300 s.
    assert [p.step.billable_seconds() for p in priced] == [350.0, 610.0]
    assert round(sum(p.cost for p in priced), 4) == round(5.5 * 960 / 3600, 4)
    assert acc.ceiling_refusal(acc.Run("20260601-120000-abcdef", NOW), priced, 2.0) is None
    refusal = acc.ceiling_refusal(acc.Run("20260601-120000-abcdef", NOW), priced, 1.0)
    assert refusal == (
        "starting acceptance run (20260601-120000-abcdef): its plan may cost up to 1.47 USD (pre-READY create 5.50 "
        "USD/h x 350 s = 0.53 USD; READY step 5.50 USD/h x 610 s = 0.93 USD; READY time plus 30 s to stop and "
        "300 s of inactive_timeout each), above TOGETHER_RL_ACC_MAX_USD=1.00 USD. Nothing was created; set "
        "TOGETHER_RL_ACC_MAX_USD to 1.47 or more to run it."
    )


def test_a_price_in_another_currency_is_refused(tmp_path):
    priced = acc.price(lambda body: (1.0, "EUR"), acc.Plan(settings(tmp_path)))
    refusal = acc.ceiling_refusal(acc.Run("20260601-120000-abcdef", NOW), priced, 100.0)
    assert refusal is not None and "in EUR, not USD" in refusal


def test_the_run_deadline_covers_every_test_and_the_sweeps(tmp_path):
    plan = acc.Plan(settings(tmp_path, TOGETHER_RL_ACC_QUEUE_SECONDS="600"))
    assert plan.run_seconds() == sum(s.deadline for s in plan.steps) + acc.SWEEP_ALLOWANCE
    assert plan.run_seconds() < acc.FOREIGN_RUN_MAX.total_seconds()  # another machine's run: over by then


# ------------------------------------------------------------------------------------------------ the guard


def test_the_guard_refuses_what_the_plan_did_not_price(tmp_path):
    plan = acc.Plan(settings(tmp_path))
    run = acc.Run("20260601-120000-abcdef", NOW)
    guard = acc.Guard(plan, run, acc.Ledger(tmp_path / "ledger.jsonl"), "http://api")

    with pytest.raises(acc.GuardRefusal, match="is not the one the plan priced"):
        guard.allow(acc.MODEL_RESOURCE, {**plan.request(), "inactive_timeout": 3600})
    guard.allow(acc.MODEL_RESOURCE, plan.request())
    guard.allow(acc.MODEL_RESOURCE, plan.request())
    with pytest.raises(acc.GuardRefusal, match="the plan priced 2, and this would be one more"):
        guard.allow(acc.MODEL_RESOURCE, plan.request())
    with pytest.raises(acc.GuardRefusal, match="does not start with the run's prefix"):
        guard.allow(acc.TRAINING_SESSION, {"model_resources_id": "x", "display_name": "trial"})
    guard.allow(acc.TRAINING_SESSION, {"model_resources_id": "x", "display_name": run.name("trial")})
    with pytest.raises(acc.GuardRefusal, match="the plan priced 1"):
        guard.allow(acc.TRAINING_SESSION, {"model_resources_id": "x", "display_name": run.name("again")})

    guard.record(acc.MODEL_RESOURCE, "mr-1")
    assert [(m.kind, m.id) for m in guard.ledger.created("http://api", run.id)] == [
        (acc.MODEL_RESOURCE, "mr-1")
    ]


# ----------------------------------------------------------------------------------------- names and ledger


def test_a_run_id_and_its_prefix():
    run = acc.Run.new(NOW)
    assert run.id.startswith("20260601-120000-") and acc.started_at(run.id) == NOW
    assert run.name("trial") == f"acc-{run.id}-trial"
    assert acc.run_of_name(run.name("trial")) == run.id
    for other in ("acc-notes", "acc-20260601-120000-ABCDEF-x", "x-acc-20260601-120000-abcdef-x", None, ""):
        assert acc.run_of_name(other) is None, other
    assert acc.run_of_name("acc-20261399-120000-abcdef-x") is None  # not a date


def test_a_run_is_over_by_its_end_line_or_its_deadline(tmp_path):
    ledger = acc.Ledger(tmp_path / "ledger.jsonl")
    ended = acc.Run("20260601-100000-aaaaaa", NOW - timedelta(hours=2))
    running = acc.Run("20260601-113000-bbbbbb", NOW - timedelta(minutes=30))
    crashed = acc.Run("20260601-090000-cccccc", NOW - timedelta(hours=3))
    ledger.start(ended, NOW + timedelta(hours=5), "http://api")
    ledger.end(ended)
    ledger.start(running, NOW + timedelta(minutes=30), "http://api")
    ledger.start(crashed, NOW - timedelta(hours=1), "http://api")
    with open(ledger.path, "a") as out:
        out.write('{"event": "end", "run"\n')  # a line a crash cut: ignored

    assert ledger.over(ended.id, NOW)[0] is True
    assert ledger.over(running.id, NOW) == (
        False,
        f"run {running.id} may still be running until 2026-06-01T12:30:00Z (its deadline in the ledger)",
    )
    assert ledger.over(crashed.id, NOW)[0] is True
    # Another machine's run: FOREIGN_RUN_MAX (3 h) after the start its id says.
    assert ledger.over("20260601-100000-dddddd", NOW)[0] is False
    assert ledger.over("20260601-085959-dddddd", NOW)[0] is True


# ------------------------------------------------------------------------------------------------ the sweeps


@pytest.fixture
def account(emulator, monkeypatch):
    """The emulator as a shared account: a client of the key's user, providers configured from the environment."""
    monkeypatch.setenv("TOGETHER_RL_POLL_INTERVAL", "0.02")
    config.reset()
    process.clear_caches()
    with TogetherRL(api_key=emulator.api_key, base_url=emulator.base_url) as client:
        yield client
    config.reset()
    process.clear_caches()


def resource(client) -> str:
    ident = client.create_model_resource(ModelResourceCreateRequest(base_model=MODEL)).id
    client.get_model_resource(ident)  # instant timings: READY at the next request
    return ident


def session(client, on: str, name: str | None) -> str:
    return client.create_training_session(
        TrainingSessionCreateRequest(model_resources_id=on, display_name=name)
    ).id


def status(emulator, ident: str) -> str:
    state = emulator.control.state()
    return next(
        o["status"] for o in state["model_resources"] + state["training_sessions"] if o["id"] == ident
    ).rsplit("_STATUS_", 1)[-1]


def write_ledger(path: Path, *lines: dict) -> acc.Ledger:
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return acc.Ledger(path)


def recording(stops: list[tuple[str, str]]) -> acc.Stop:
    def stop(kind: str, ident: str) -> None:
        stops.append((kind, ident))
        acc.provider_stop(kind, ident)

    return stop


def test_the_sweep_before_stops_only_what_finished_runs_of_this_user_provably_left(
    emulator, account, tmp_path
):
    base = emulator.base_url
    old, running, gone = "20200101-000000-aaaaaa", "20200101-000000-bbbbbb", "20200101-000000-cccccc"
    ended = {"run": old, "base_url": base}
    live = {"run": running, "base_url": base}
    made = {
        "ended run's resource": resource(account),
        "running run's resource": resource(account),
        "unproven resource": resource(account),
        "other API's resource": resource(account),
    }
    on = made["unproven resource"]
    made["gone machine's session"] = session(account, on, f"acc-{gone}-trial")
    recent = (datetime.now(timezone.utc) - timedelta(hours=1)).strftime("%Y%m%d-%H%M%S")
    made["young foreign session"] = session(account, on, f"acc-{recent}-dddddd-trial")
    made["look-alike session"] = session(account, on, "acc-2020-trial")
    made["unnamed session"] = session(account, on, None)
    emulator.control.configure(user_id="user_colleague")
    made["colleague's resource"] = resource(account)
    made["colleague's named session"] = session(account, made["colleague's resource"], f"acc-{gone}-trial")
    emulator.control.configure(user_id="user_emulator")
    ledger = write_ledger(
        tmp_path / "ledger.jsonl",
        {**ended, "event": "start", "deadline": "2030-01-01T00:00:00Z"},
        {**ended, "event": "created", "kind": acc.MODEL_RESOURCE, "id": made["ended run's resource"]},
        {**ended, "event": "created", "kind": acc.MODEL_RESOURCE, "id": made["colleague's resource"]},
        {**ended, "event": "end"},
        {**live, "event": "start", "deadline": "2999-01-01T00:00:00Z"},
        {**live, "event": "created", "kind": acc.MODEL_RESOURCE, "id": made["running run's resource"]},
        {"run": old, "base_url": "https://elsewhere", "event": "created", "kind": acc.MODEL_RESOURCE,
         "id": made["other API's resource"]},
    )  # fmt: skip
    run = acc.Run.new()
    stops: list[tuple[str, str]] = []

    swept, others = acc.sweep_before(account, ledger, run, base, recording(stops))

    stopped = [made["gone machine's session"], made["ended run's resource"]]
    assert stops == [(acc.TRAINING_SESSION, stopped[0]), (acc.MODEL_RESOURCE, stopped[1])]  # sessions first
    assert [(s.action, s.id) for s in swept] == [
        ("left", made["young foreign session"]),
        ("left", made["running run's resource"]),
        ("stopped", stopped[0]),
        ("stopped", stopped[1]),
    ]
    assert "may still be running until" in swept[0].why and "its start" in swept[0].why
    assert "its deadline in the ledger" in swept[1].why
    assert f"run {old} ended at" in swept[3].why and "in the ledger as run" in swept[3].why
    assert swept[2].why.startswith(f"named 'acc-{gone}-trial', made ")
    # Not the tier's (no proof for this API): counted, never named, never touched.
    assert others == 4  # the unproven and other API's resources, the look-alike and the unnamed session
    assert status(emulator, stopped[0]) == "STOPPED" and status(emulator, stopped[1]) in (
        "STOPPING",
        "STOPPED",
    )
    for role, ident in made.items():
        if ident not in stopped:
            assert status(emulator, ident) in ("READY", "RUNNING"), role


def test_the_sweep_before_leaves_what_was_made_after_the_run_started(emulator, account, tmp_path):
    run = acc.Run.new(datetime.now(timezone.utc) - timedelta(minutes=5))
    ident = resource(account)
    old = "20200101-000000-aaaaaa"
    ledger = write_ledger(
        tmp_path / "ledger.jsonl",
        {
            "run": old,
            "base_url": emulator.base_url,
            "event": "created",
            "kind": acc.MODEL_RESOURCE,
            "id": ident,
        },
        {"run": old, "event": "end"},
    )

    stops: list[tuple[str, str]] = []
    swept, _ = acc.sweep_before(account, ledger, run, emulator.base_url, recording(stops))

    assert stops == [] and [(s.action, s.id) for s in swept] == [("left", ident)]
    assert swept[0].why.endswith("but made after this run started")


def test_the_sweep_before_never_forces_a_stop(emulator, account, tmp_path):
    ident = resource(account)
    foreign = session(account, ident, "a colleague's session")
    old = "20200101-000000-aaaaaa"
    ledger = write_ledger(
        tmp_path / "ledger.jsonl",
        {
            "run": old,
            "base_url": emulator.base_url,
            "event": "created",
            "kind": acc.MODEL_RESOURCE,
            "id": ident,
        },
        {"run": old, "event": "end"},
    )

    swept, _ = acc.sweep_before(account, ledger, acc.Run.new(), emulator.base_url, acc.provider_stop)

    assert [(s.action, s.id) for s in swept] == [("failed", ident)]
    assert foreign in swept[0].why  # the refusal names the session it will not end
    assert status(emulator, ident) == "READY" and status(emulator, foreign) == "RUNNING"
    assert not [r for r in emulator.control.requests() if "force=true" in r["query"]]


def test_the_sweep_after_stops_whatever_of_this_run_is_left_and_nothing_else(emulator, account, tmp_path):
    run = acc.Run.new()
    left, done, elsewhere = resource(account), resource(account), resource(account)
    lost_answer = session(account, left, run.name("trial"))  # made, but no ledger line
    account.stop_model_resource(done)
    ledger = acc.Ledger(tmp_path / "ledger.jsonl")
    ledger.start(run, datetime.now(timezone.utc) + timedelta(hours=1), emulator.base_url)
    ledger.made(run, acc.MODEL_RESOURCE, left, emulator.base_url, "test_x")
    ledger.made(run, acc.MODEL_RESOURCE, done, emulator.base_url, "test_x")
    ledger.made(acc.Run.new(), acc.MODEL_RESOURCE, elsewhere, emulator.base_url, "test_x")  # another run's
    stops: list[tuple[str, str]] = []

    swept, checked = acc.sweep_after(account, ledger, run, emulator.base_url, recording(stops))

    assert checked == 3
    assert stops == [(acc.TRAINING_SESSION, lost_answer), (acc.MODEL_RESOURCE, left)]
    assert {s.action for s in swept} == {"stopped"}
    assert all("a test's clean-up missed it" in s.why for s in swept)
    assert status(emulator, left) in ("STOPPING", "STOPPED") and status(emulator, lost_answer) == "STOPPED"
    assert status(emulator, elsewhere) == "READY"


# ------------------------------------------------------------------------------------ where the tests live

ROOT = Path(__file__).resolve().parents[2]


def test_the_acceptance_tests_are_outside_the_suite_that_make_test_collects():
    testpaths = re.findall(r"^testpaths = (.*)$", (ROOT / "pyproject.toml").read_text(), re.M)
    assert testpaths == ['["tests"]'] and (ROOT / "acceptance" / "test_live.py").exists()


def test_pytest_on_the_acceptance_tests_refuses_unless_make_acceptance_started_the_run(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("TOGETHER_")}
    env.update(
        TOGETHER_RL_ACC="1", TOGETHER_API_KEY="k", TOGETHER_RL_ACC_LEDGER=str(tmp_path / "ledger.jsonl")
    )
    env[acc.ENV_RUN] = "20260601-120000-abcdef"  # a run id, but no run of it in the ledger
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "acceptance", "-p", "no:cacheprovider"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )

    assert result.returncode != 0
    assert (
        "ERROR: starting the acceptance tests: they were not started by `make acceptance` (no open run "
        "'20260601-120000-abcdef' in the ledger)"
    ) in result.stderr, result.stdout + result.stderr
    assert "collected" not in result.stdout
