"""``make acceptance``: the acceptance tests (acceptance/) against the Together API, for whoever holds a key.

Only with ``TOGETHER_RL_ACC=1`` and ``TOGETHER_API_KEY`` set; otherwise one sentence says what is missing and
nothing is asked of any API (exit 2). Then, in this order (harness/acceptance.py has every rule):

1. the plan is priced with ``estimate-cost`` (its model resources' create body, times the longest each may bill)
   and refused above ``TOGETHER_RL_ACC_MAX_USD`` (default 2 USD), in one sentence with the figures (exit 3);
   nothing has been created;
2. the run's start and deadline go to the ledger, and the sweep before stops what earlier, finished runs of the
   tier left (proof: the ledger or a session's ``acc-<run id>-`` name; made by the key's user; older than this
   run's start);
3. pytest runs acceptance/ (each test stops what it made, however it ends), within the run's deadline;
4. the sweep after stops whatever of this run is still active (a stop here fails the run: a test's clean-up
   missed it), and the run's end goes to the ledger.

Exit status: 0 passed and nothing left; 1 a test failed, a stop failed or the sweep after had to stop something;
2 the gate or a setting refused; 3 the ceiling refused. The key is never printed (the client redacts it).
``TOGETHER_BASE_URL`` points it at another API: the release tier runs it against the emulator
(tests/e2e/test_acceptance_tier.py).
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

from harness import acceptance as acc

ROOT = Path(__file__).resolve().parents[1]


def say(line: str) -> None:
    print(line, flush=True)


def refuse(sentence: str, code: int) -> int:
    print(f"error: {sentence}", file=sys.stderr, flush=True)
    return code


def main() -> int:
    refusal = acc.gate_refusal(os.environ)
    if refusal is not None:
        return refuse(refusal, 2)
    try:
        settings = acc.Settings.from_env()
    except acc.SettingError as exc:
        return refuse(str(exc), 2)

    from pulumi_together_rl.client import TogetherRL, errors
    from pulumi_together_rl.client.models import ModelResourceCreateRequest
    from pulumi_together_rl.messages import explain

    run = acc.Run.new()
    plan = acc.Plan(settings)
    try:
        client = TogetherRL()
    except errors.ConfigurationError as exc:
        return refuse(f"starting acceptance run ({run.id}): {explain(exc)[0]}. Check {acc.ENV_BASE_URL}.", 2)
    base_url = client.base_url
    where = acc.ENV_BASE_URL if os.environ.get(acc.ENV_BASE_URL, "").strip() else "the default: the real API"
    say(f"acceptance run {run.id} against {base_url} (from {where}); names start with {run.prefix}")
    say(f"ledger: {settings.ledger}")

    def estimate(body: dict) -> tuple[float, str]:
        answer = client.estimate_model_resource_cost(ModelResourceCreateRequest.model_validate(body))
        return answer.price_per_hour, answer.currency

    with client:
        try:
            priced = acc.price(estimate, plan)
        except Exception as exc:
            cause = explain(exc)[0]
            return refuse(
                f"pricing acceptance run ({run.id}): {cause}. Nothing was created; check {acc.ENV_BASE_URL}, "
                f"{acc.ENV_KEY} and the network, then run it again.",
                1,
            )
        refusal = acc.ceiling_refusal(run, priced, settings.max_usd)
        if refusal is not None:
            return refuse(refusal, 3)
        total = sum(p.cost for p in priced)
        say(
            f"plan: {acc.describe_price(priced)}; at most {total:.2f} USD in all, within "
            f"{acc.ENV_MAX_USD}={settings.max_usd:.2f} USD"
        )
        try:
            return _run(client, run, plan, settings, base_url)
        except KeyboardInterrupt:
            return refuse(
                f"running acceptance run ({run.id}): interrupted. Its end is in the ledger, so the next "
                "`make acceptance` stops whatever of it is left before it starts.",
                130,
            )
        except Exception as exc:  # the API failed a sweep's list or read: one sentence, never a traceback
            if os.environ.get("TOGETHER_RL_DEBUG") == "1":
                raise
            return refuse(
                f"running acceptance run ({run.id}): {explain(exc)[0]}. Run `make acceptance` again once the API "
                "answers: its sweep before stops what this run left.",
                1,
            )


def _run(client, run: acc.Run, plan: acc.Plan, settings: acc.Settings, base_url: str) -> int:
    ledger = acc.Ledger(settings.ledger)
    deadline = run.started + timedelta(seconds=plan.run_seconds())
    work = Path(tempfile.mkdtemp(prefix="together-rl-acceptance-"))
    # The providers' create journal and Pulumi's home for this run alone (never the user's, nor a team's shared
    # journal): this process's stops and the tests' process share them.
    os.environ["TOGETHER_RL_STATE_DIR"] = str(work / "state")
    os.environ["PULUMI_HOME"] = str(work / "pulumi-home")
    for shared in ("PULUMI_BACKEND_URL", "TOGETHER_RL_JOURNAL_URL"):
        os.environ.pop(shared, None)
    failed = False
    ledger.start(run, deadline, base_url)
    try:
        swept, others = acc.sweep_before(client, ledger, run, base_url, acc.provider_stop)
        failed |= _report(
            "sweep before", swept, f"{others} other active objects of this user are not the tier's"
        )
        code = _pytest(run, settings, deadline)
        failed |= code != 0
    finally:
        try:
            swept, checked = acc.sweep_after(client, ledger, run, base_url, acc.provider_stop)
        except Exception as exc:
            failed = True
            say(
                f"sweep after: failed: {exc}. Run `make acceptance` again: its sweep before stops what is left."
            )
        else:
            if swept:
                failed = True
                _report("sweep after", swept, f"{checked} objects of this run checked")
            else:
                say(
                    f"sweep after: nothing of this run is left active ({checked} objects of this run checked)"
                )
        ledger.end(run)
        shutil.rmtree(work, ignore_errors=True)
    say(f"acceptance run {run.id}: {'FAILED' if failed else 'passed'}")
    return 1 if failed else 0


def _report(which: str, swept: list[acc.Swept], tail: str) -> bool:
    """Print a sweep's lines; whether any of its stops failed."""
    counts = {action: sum(s.action == action for s in swept) for action in ("stopped", "left", "failed")}
    say(f"{which}: stopped {counts['stopped']}, left {counts['left']}, failed {counts['failed']}; {tail}")
    for item in swept:
        say(item.line())
    return counts["failed"] > 0


def _pytest(run: acc.Run, settings: acc.Settings, deadline: datetime) -> int:
    """pytest over acceptance/, stopped with SIGINT (its clean-ups still run) at the run's deadline, less the
    sweeps' allowance."""
    env = dict(os.environ, **{acc.ENV_RUN: run.id, acc.ENV_LEDGER: str(settings.ledger)})
    argv = [sys.executable, "-m", "pytest", str(ROOT / "acceptance"), "-p", "no:cacheprovider", "-v"]
    process = subprocess.Popen(argv, cwd=ROOT, env=env)
    stop_at = deadline - timedelta(seconds=acc.SWEEP_ALLOWANCE / 2)
    try:
        return process.wait(timeout=max(1.0, (stop_at - datetime.now(timezone.utc)).total_seconds()))
    except subprocess.TimeoutExpired:
        say(f"acceptance run {run.id}: past its deadline; interrupting the tests (their clean-ups still run)")
        process.send_signal(signal.SIGINT)
    except KeyboardInterrupt:
        say(f"acceptance run {run.id}: interrupted; waiting for the tests' clean-ups, then the sweep after")
    try:
        code = process.wait(timeout=2 * acc.STOP_TIMEOUT)
    except subprocess.TimeoutExpired:
        process.kill()
        code = process.wait()
    return code or 1


if __name__ == "__main__":
    started = time.monotonic()
    status = main()
    if status in (0, 1):
        print(f"make acceptance: {time.monotonic() - started:.0f} s", flush=True)
    sys.exit(status)
