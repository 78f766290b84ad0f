"""`python -m pulumi_together_rl reap` with real stacks through the real Pulumi CLI, on both faces.

The story: a stack (tests/e2e/projects/deadline, or its Pulumi YAML twin) declares a deadline a few seconds
ahead; once it has passed on the clocks of this machine and of the emulator (which runs on this machine's clock
unless a test moves it), `reap --stop --yes` stops what the stack holds, with no other command run; the next
`pulumi up` records it stopped and creates nothing; moving the deadline replaces both. On the dynamic face the
same run shows what reap never stops: another stack's objects with a later deadline or none, a look-alike no
state holds, and an object a live create may hold.
"""

from __future__ import annotations

import shlex
import subprocess
import sys
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
from harness.cli import ROOT, active
from harness.faces import PLUGIN
from harness.journals import entries, hold, rewrite

from pulumi_together_rl.client import TogetherRL
from pulumi_together_rl.client.models import ModelResourceCreateRequest
from pulumi_together_rl.ownership.records import State

AHEAD = 25.0
"""Seconds from the first `pulumi up` to the deadline: the up (a GPU and a session, READY and RUNNING) must end
before it, or the create itself stops them at it (another path, tests/resources/test_deadline.py)."""

CREATES = {("POST", "/v1/rl/model-resources"), ("POST", "/v1/rl/training-sessions")}


@pytest.fixture
def client(emulator):
    with TogetherRL(api_key=emulator.api_key, base_url=emulator.base_url) as made:
        yield made


COST = ROOT / "docs" / "cost.md"
DOCUMENTED = [["reap"], ["reap", "--stop"], ["reap", "--stop", "--yes"]]
"""The commands of docs/cost.md's ``commands:reap`` block (after ``python -m pulumi_together_rl``)."""


def documented() -> list[list[str]]:
    """The commands docs/cost.md's ``commands:reap`` block gives users, as they are written."""
    text = COST.read_text()
    block = text.split("<!-- commands:reap (tests/e2e/test_reap_cli.py) -->\n```bash\n", 1)[1].split(
        "```", 1
    )[0]
    found = [shlex.split(line.split(" #", 1)[0]) for line in block.splitlines() if line.strip()]
    assert all(words[:3] == ["python", "-m", "pulumi_together_rl"] for words in found), found
    return [words[3:] for words in found]


def cron_line() -> str:
    """docs/cost.md's crontab entry, its five schedule fields aside."""
    (line,) = [line for line in COST.read_text().splitlines() if line.startswith("*/15 * * * * ")]
    return line.split(" ", 5)[5]


def test_the_documented_commands_are_the_ones_the_story_runs():
    assert documented() == DOCUMENTED
    command = cron_line()
    assert command.startswith("cd /srv/training && uv run python -m pulumi_together_rl reap --stop --yes ")


def reap_cli(*args: str, env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    """`python -m pulumi_together_rl reap ARGS` as a subprocess, standard input not a terminal."""
    return subprocess.run(
        [sys.executable, "-m", "pulumi_together_rl", "reap", *args],
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
        cwd=cwd,
        stdin=subprocess.DEVNULL,
        check=False,
    )


def requests(emulator) -> list[tuple[str, str]]:
    made = [(r["method"], r["path"]) for r in emulator.control.requests()]
    emulator.control.clear_requests()
    return made


def active_ids(emulator) -> set[str]:
    now = active(emulator)
    return {o["id"] for o in now["model_resources"] + now["training_sessions"]}


def soon() -> tuple[str, float]:
    """A deadline :data:`AHEAD` seconds from now, as an RFC 3339 time, and that moment."""
    at = datetime.now(timezone.utc).replace(microsecond=0) + timedelta(seconds=AHEAD)
    return at.strftime("%Y-%m-%dT%H:%M:%SZ"), at.timestamp()


def wait_past(moment: float) -> None:
    assert time.time() < moment, "the `pulumi up` took longer than AHEAD: raise it"
    time.sleep(moment - time.time() + 1.5)


def ids(stack) -> dict[str, str]:
    return {name: entry["id"] for name, entry in stack.resources().items()}


def stop_reasons(stack) -> dict[str, str | None]:
    return {
        name: entry["outputs"].get("stop_reason", entry["outputs"].get("stopReason"))
        for name, entry in stack.resources().items()
    }


def after_reap_up_creates_nothing_and_moving_the_deadline_replaces(
    stack, emulator, held: dict[str, str]
) -> None:
    """The rest of the story, the same on both faces."""
    requests(emulator)
    stack.up()
    assert not CREATES & set(requests(emulator))  # nothing re-created
    assert ids(stack) == held
    assert stop_reasons(stack) == {"gpu": "deadline", "trial": "deadline"}
    assert not set(held.values()) & active_ids(emulator)

    stack.set("stopAfter", "2h")  # moved once passed: a new GPU and session, with the new deadline
    stack.up()
    moved = ids(stack)
    assert not set(moved.values()) & set(held.values())
    assert set(moved.values()) <= active_ids(emulator)
    assert {c for c in requests(emulator) if c in CREATES} == CREATES
    stack.destroy()


def test_reap_stops_a_plugin_face_stack_past_its_deadline_with_no_other_command(cli_stack, emulator):
    deadline = soon()
    stack = cli_stack("deadline", face=PLUGIN).init({"stopAfter": deadline[0]})
    stack.up()
    held = ids(stack)
    assert set(held.values()) <= active_ids(emulator)
    wait_past(deadline[1])
    requests(emulator)

    reaped = reap_cli("--stop", "--yes", env=dict(stack.env), cwd=stack.project)

    assert reaped.returncode == 0, reaped.stdout + reaped.stderr
    stops = [path for method, path in requests(emulator) if method == "POST" and path.endswith("/stop")]
    assert stops == [
        f"/v1/rl/training-sessions/{held['trial']}/stop",
        f"/v1/rl/model-resources/{held['gpu']}/stop",
    ]
    fq = f"organization/together-rl-deadline/{stack.name}"
    assert (
        f"stack {fq}: stopped model resource {held['gpu']} (now STOPPING); its deadline, stop_after "
        f"{deadline[0]}, had passed." in reaped.stdout.splitlines()
    ), reaped.stdout
    assert emulator.api_key not in reaped.stdout + reaped.stderr
    after_reap_up_creates_nothing_and_moving_the_deadline_replaces(stack, emulator, held)


def test_reap_stops_only_what_is_past_its_deadline_and_no_live_create_holds(
    cli_stack, emulator, client, monkeypatch
):
    """Dynamic face. Beside the stack: another stack of the same backend whose GPU has a later deadline and whose
    session has none, a look-alike GPU no state holds, and (first run) a live create holding the GPU."""
    prod = cli_stack("deadline").init({"stopAfter": "2h", "trialStopAfter": "none"})
    prod.up()
    dev = cli_stack("deadline", beside=prod)
    dev.env = dict(prod.env)  # one machine: the same Pulumi home and create journal
    deadline = soon()
    dev.init({"stopAfter": deadline[0]})
    dev.up()
    held, theirs = ids(dev), ids(prod)
    lookalike = client.create_model_resource(ModelResourceCreateRequest(base_model="Qwen/Qwen3.5-4B")).id
    untouched = set(theirs.values()) | {lookalike}
    wait_past(deadline[1])

    # docs/cost.md's commands as written: the dry run, --stop without a terminal (refused), then --stop --yes.
    dry_run, asks, yes = documented()
    dry = reap_cli(*dry_run[1:], env=dict(dev.env), cwd=dev.project)
    assert dry.returncode == 0, dry.stderr
    assert "Dry run: nothing was stopped; run again with --stop to stop 2." in dry.stdout
    refused = reap_cli(*asks[1:], env=dict(dev.env), cwd=dev.project)
    assert refused.returncode == 4 and "standard input is not a terminal" in refused.stderr, refused.stderr
    assert set(held.values()) | untouched <= active_ids(emulator)

    # The GPU's create as still in flight: its journal entry unfinished, its lease held by a live process.
    monkeypatch.setenv("TOGETHER_RL_STATE_DIR", dev.env["TOGETHER_RL_STATE_DIR"])  # the stacks' journal
    (entry,) = [seen for seen in entries() if seen.entry.id == held["gpu"]]
    holder = hold(rewrite(entry, state=State.CREATED))
    requests(emulator)
    try:
        first = reap_cli(*yes[1:], env=dict(dev.env), cwd=dev.project)
    finally:
        holder.kill()
        holder.wait()
        (entry,) = [seen for seen in entries() if seen.entry.id == held["gpu"]]
        rewrite(entry, state=State.DONE)  # and done again, as that create would have left it
    assert first.returncode == 0, first.stderr
    assert [p for m, p in requests(emulator) if p.endswith("/stop")] == [
        f"/v1/rl/training-sessions/{held['trial']}/stop"
    ]
    assert (
        f"model resource gpu ({held['gpu']})" in first.stdout and "a live create may hold it" in first.stdout
    )
    assert (held["gpu"] in active_ids(emulator)) and untouched <= active_ids(emulator)

    # The crontab entry of docs/cost.md, as cron runs it (in the project's folder; uv's lock left as it is).
    log = dev.tmp / "reap.log"
    cron = (
        cron_line()
        .replace("/srv/training", shlex.quote(str(dev.project)))
        .replace("reap.log", shlex.quote(str(log)))
    )
    ran = subprocess.run(["sh", "-c", cron], env={**dev.env, "UV_FROZEN": "1"}, timeout=600, check=False)
    second = subprocess.CompletedProcess(ran.args, ran.returncode, log.read_text(), log.read_text())
    assert second.returncode == 0, second.stderr
    assert [p for m, p in requests(emulator) if p.endswith("/stop")] == [
        f"/v1/rl/model-resources/{held['gpu']}/stop"
    ]
    assert untouched <= active_ids(emulator) and not set(held.values()) & active_ids(emulator)
    prod_lines = [line for line in second.stdout.splitlines() if prod.name in line]
    assert any("model resource gpu" in line and "its deadline is ahead" in line for line in prod_lines), (
        second.stdout
    )
    assert lookalike not in second.stdout + first.stdout + dry.stdout
    said = "".join(r.stdout + r.stderr for r in (dry, refused, first, second))
    assert emulator.api_key not in said

    after_reap_up_creates_nothing_and_moving_the_deadline_replaces(dev, emulator, held)
    prod.destroy()
    client.stop_model_resource(lookalike)
