"""The acceptance tier's fixtures: the product's own providers and client against the API that
``TOGETHER_API_KEY`` / ``TOGETHER_BASE_URL`` name (docs/releasing.md; the rules are harness/acceptance.py's).

These tests run only under ``make acceptance`` (scripts/acceptance.py), which opens the gate, prices the plan
against the ceiling, sweeps before and after, and hands the run id over in ``TOGETHER_RL_ACC_RUN``; a plain
``pytest acceptance`` refuses to start. This folder is outside ``testpaths``, so ``make test`` never collects it;
the release tier runs it, through ``make acceptance``, against the emulator (tests/e2e/test_acceptance_tier.py).

* :func:`guard` wraps the client's two creates for the whole run (:class:`harness.acceptance.Guard`): nothing the
  plan did not price is sent, and every id a create returns is in the ledger before the test goes on.
* :func:`live` is one test's world: the providers configured as the dynamic-provider server configures them (from
  the environment), a client, the run and its plan step. Its clean-up, which runs however the test ends, stops
  everything the test made (training sessions first, never forced) and waits until each holds nothing.
* Each test's deadline is its plan step's (``pytest-timeout`` on the test's own call, never on the clean-up).
"""

from __future__ import annotations

import os
from typing import Any

import pytest
from harness import acceptance as acc

from pulumi_together_rl.client import TogetherRL
from pulumi_together_rl.client.api import resolve_base_url


def pytest_configure(config: pytest.Config) -> None:
    refusal = acc.gate_refusal(os.environ)
    run_id = os.environ.get(acc.ENV_RUN, "")
    if refusal is None:
        try:
            started = acc.Ledger(acc.Settings.from_env().ledger).open(run_id)
        except acc.SettingError as exc:
            refusal = str(exc)
        else:
            if not started:  # the run's start line, which make acceptance writes once the ceiling has passed
                refusal = (
                    "starting the acceptance tests: they were not started by `make acceptance` (no open run "
                    f"{run_id!r} in the ledger), which prices the run against its ceiling and sweeps before and "
                    "after it. Run `make acceptance`."
                )
    if refusal is not None:
        raise pytest.UsageError(refusal)


@pytest.fixture(scope="session")
def context() -> acc.Context:
    settings = acc.Settings.from_env()
    run_id = os.environ[acc.ENV_RUN]
    ledger = acc.Ledger(settings.ledger)
    started = acc.started_at(run_id)
    assert started is not None, f"{acc.ENV_RUN}={run_id!r} is not a run id"
    return acc.Context(acc.Run(run_id, started), acc.Plan(settings), ledger, resolve_base_url(None))


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    plan = acc.Plan(acc.Settings.from_env())
    for item in items:
        step = plan.step(item.name)  # a test the plan does not know is an error: it would create unpriced
        # The deadline bounds the test's own call: its clean-up (the stops) is never cut short by it.
        item.add_marker(pytest.mark.timeout(step.deadline, func_only=True))


@pytest.fixture(scope="session", autouse=True)
def guard(context: acc.Context):
    made = acc.Guard(context.plan, context.run, context.ledger, context.base_url)
    resource_create, session_create = TogetherRL.create_model_resource, TogetherRL.create_training_session

    def create_model_resource(self: TogetherRL, req: Any, *, record: Any = None) -> Any:
        made.allow(acc.MODEL_RESOURCE, req.to_wire())
        created = resource_create(self, req, record=record)
        made.record(acc.MODEL_RESOURCE, created.id)
        return created

    def create_training_session(self: TogetherRL, req: Any, *, record: Any = None) -> Any:
        made.allow(acc.TRAINING_SESSION, req.to_wire())
        created = session_create(self, req, record=record)
        made.record(acc.TRAINING_SESSION, created.id)
        return created

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(TogetherRL, "create_model_resource", create_model_resource)
        patch.setattr(TogetherRL, "create_training_session", create_training_session)
        yield made


@pytest.fixture
def live(request: pytest.FixtureRequest, context: acc.Context, guard: acc.Guard):
    step = context.plan.step(request.node.name)
    guard.test, guard.made = request.node.name, []
    client = TogetherRL()
    try:
        yield acc.Live(context, step, acc.providers(), client, guard.made)
    finally:
        failures = []
        for kind in (acc.TRAINING_SESSION, acc.MODEL_RESOURCE):
            for made_kind, ident in list(guard.made):
                if made_kind != kind:
                    continue
                try:
                    acc.provider_stop(kind, ident)  # a 404 or an object already ended counts as done
                except Exception as exc:
                    failures.append(f"{kind} {ident}: {exc}")
        client.close()
        guard.test = ""
        assert not failures, "the clean-up could not stop what the test made: " + "; ".join(failures)
