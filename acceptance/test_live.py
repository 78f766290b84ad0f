"""The product's lifecycle against the API ``TOGETHER_BASE_URL`` names (the real one under ``make acceptance``; the
emulator in the release tier's run of this same file): two model resources, one training session, as the plan in
harness/acceptance.py prices them.

Everything goes through the product's own code: the dynamic providers in this process (check, create, diff,
update, read, delete: what ``pulumi up`` and ``pulumi destroy`` call), the client a notebook would use, and the
orphan finder's command (a dry run: the tier never runs ``orphans --stop``, which could stop a colleague's
objects). Each test's clean-up stops whatever it made, however it ended (conftest.py).
"""

from __future__ import annotations

import io
import json
import re
import time
from pathlib import Path
from typing import Any

import pytest
from harness import acceptance as acc

from pulumi_together_rl import orphans
from pulumi_together_rl.__main__ import build_parser
from pulumi_together_rl.client.models import ModelResourceCreateRequest
from pulumi_together_rl.messages import UserError

RESOURCE_TYPE = "pulumi-python:dynamic/together:ModelResource"


def test_a_create_that_times_out_is_stopped_before_ready(live: acc.Live):
    """A model resource's create whose wait for READY runs out (``create_timeout``, the plan's pre-READY window)
    fails naming the resource and stops it, before it was ever READY: free, as billing runs only while READY."""
    plan, step = live.context.plan, live.step
    declared = {**plan.request(), "owner": live.owner("pre-ready"), "create_timeout": step.ready_seconds}

    checked = live.resources.check({}, declared)
    assert checked.failures == [], [(f.property, f.reason) for f in checked.failures]
    assert (
        checked.inputs["price_per_hour"] > 0 and checked.inputs["currency"] == "USD"
    )  # the preview's estimate
    with pytest.raises(UserError) as raised:
        live.resources.create(checked.inputs)

    assert len(live.made) == 1 and live.made[0][0] == acc.MODEL_RESOURCE, live.made  # one POST, one object
    ident = live.made[0][1]
    message = str(raised.value)
    assert message.startswith(f"creating model resource ({ident}): timed out after "), message
    # The wait's last look saw it short of READY (a look at READY would have ended the wait with success).
    assert re.search(r"last state: (PENDING|CREATING)\b", message), message
    assert "It has been stopped: nothing is left billing." in message, message
    stopped = live.client.get_model_resource(ident)
    assert stopped.status.short in ("STOPPING", "STOPPED"), stopped.status
    assert stopped.inactive_timeout in (None, acc.INACTIVE_TIMEOUT)  # None: an API that does not echo it
    assert stopped.compute_config.num_generator_replicas == 0 and stopped.lora_enabled is True
    # A refresh of a state holding it drops it: it has ended.
    assert live.resources.read(ident, checked.inputs).id == ""


def test_listed_as_an_orphan_then_adopted_trained_on_renamed_and_stopped(live: acc.Live, tmp_path: Path):
    """The one READY step. A model resource made outside Pulumi (the product's client, as a notebook makes one) is
    listed by the orphan finder; ``adopt_id`` takes it over and waits for READY; a training session named with the
    run's prefix starts on it and is listed as this run's orphan while no stack holds it; a PATCH renames it and
    changes its W&B metadata; the session is stopped, then the resource. From READY on, every step is held to the
    plan's READY budget (what the ceiling priced)."""
    plan, settings, run = live.context.plan, live.context.plan.settings, live.run
    born = acc.Deadline(acc.LISTING_WINDOW)
    resource = live.client.create_model_resource(ModelResourceCreateRequest(**plan.request()))
    assert live.made == [(acc.MODEL_RESOURCE, resource.id)]
    assert resource.status.short in ("PENDING", "CREATING", "READY"), resource.status

    # The orphan finder, a dry run: no stack holds it, so it is listed, too young to be stopped by --stop.
    found = _listed_until(lambda listed: resource.id in listed, born, tmp_path, "--none")
    item = found[resource.id]
    assert item["kind"] == "model_resource" and item["base_model"] == settings.model, item
    assert item["status"] in ("PENDING", "CREATING", "READY"), item
    assert item["price_per_hour"] > 0 and item["currency"] == "USD", item
    assert item["held_back"] == "too_young" and item["stop_eligible"] is False, item
    # A stack whose state holds it: not an orphan.
    holding = _state_holding(tmp_path, resource.id)
    assert resource.id not in _listed(tmp_path, "--state", holding)
    assert born.left() > 0, (
        f"the listing took {born.spent():.0f} s, longer than the plan's {acc.LISTING_WINDOW} s"
    )

    # adopt_id: the provider takes it over (held to the declared inputs with the server's defaults) and waits.
    declared = {
        **plan.request(),
        "owner": live.owner("gpu"),
        "adopt_id": resource.id,
        "create_timeout": settings.queue,
    }
    checked = live.resources.check({}, declared)
    assert checked.failures == [], [(f.property, f.reason) for f in checked.failures]
    adopted = live.resources.create(checked.inputs)
    billed = acc.Deadline(settings.ready)  # READY from here: billed
    assert adopted.id == resource.id and adopted.outs["status"] == "READY", adopted.outs
    assert live.made == [(acc.MODEL_RESOURCE, resource.id)]  # an adopt POSTs nothing
    assert adopted.outs["effective_lora_enabled"] is True
    assert adopted.outs["effective_compute_config"]["num_generator_replicas"] == 0
    assert adopted.outs["effective_inactive_timeout"] == acc.INACTIVE_TIMEOUT
    assert adopted.outs["expires_at"], adopted.outs  # set while READY

    # A training session on it, named with the run's prefix (the sweeps' proof that it is this run's).
    wandb = {"project": "acceptance", "run_name": run.name("trial")}
    session_declared = {
        "model_resources_id": resource.id,
        "owner": live.owner("trial"),
        "display_name": run.name("trial"),
        "metadata": {"wandb": wandb},
        "create_timeout": max(1.0, billed.left()),
    }
    checked = live.sessions.check({}, session_declared)
    assert checked.failures == [], [(f.property, f.reason) for f in checked.failures]
    session = live.sessions.create(checked.inputs)
    assert session.outs["status"] == "RUNNING", session.outs
    assert [kind for kind, _ in live.made] == [acc.MODEL_RESOURCE, acc.TRAINING_SESSION]
    on_api = live.client.get_training_session(session.id)
    assert on_api.display_name == run.name("trial") and on_api.model_resources_id == resource.id
    assert on_api.metadata is not None and on_api.metadata.wandb is not None
    assert on_api.metadata.wandb.project == "acceptance" and on_api.metadata.wandb.run_name == run.name(
        "trial"
    )
    assert on_api.created_by == live.client.get_model_resource(resource.id).created_by  # the key's user
    assert billed.left() > 0, f"the session took {billed.spent():.0f} s of the {settings.ready:.0f} s budget"

    # The finder again, with a stack that holds the resource but not the session: the session is this run's
    # orphan, listed by its name; the resource is held.
    found = _listed_until(lambda listed: session.id in listed, billed, tmp_path, "--state", holding)
    assert resource.id not in found
    assert found[session.id]["kind"] == "training_session", found[session.id]
    assert found[session.id]["display_name"] == run.name("trial")
    assert found[session.id]["model_resources_id"] == resource.id

    # A PATCH of display_name and metadata: an update in place (nothing replaced), keeping the run's prefix.
    news = {
        **session_declared,
        "display_name": run.name("renamed"),
        "metadata": {"wandb": {"project": "acceptance", "run_name": run.name("renamed"), "group": "release"}},
    }
    checked = live.sessions.check(session.outs, news)
    assert checked.failures == [], [(f.property, f.reason) for f in checked.failures]
    diff = live.sessions.diff(session.id, session.outs, checked.inputs)
    assert diff.changes is True and not diff.replaces, (diff.changes, diff.replaces)
    updated = live.sessions.update(session.id, session.outs, checked.inputs)
    assert updated.outs["display_name"] == run.name("renamed"), updated.outs
    on_api = live.client.get_training_session(session.id)
    assert on_api.display_name == run.name("renamed")
    assert on_api.metadata is not None and on_api.metadata.wandb is not None
    assert on_api.metadata.wandb.run_name == run.name("renamed") and on_api.metadata.wandb.group == "release"
    assert on_api.metadata.wandb.project == "acceptance"  # omitted keys stay (the PATCH merges key by key)
    refreshed = live.sessions.read(session.id, updated.outs)
    assert refreshed.id == session.id and refreshed.outs["display_name"] == run.name("renamed")
    assert billed.left() > 0, f"the PATCH came {billed.spent():.0f} s into the {settings.ready:.0f} s budget"

    # Stop: the session (until its slot is free), then the resource (until billing stops), as destroy does.
    live.sessions.delete(session.id, {**updated.outs, "delete_timeout": acc.STOP_TIMEOUT})
    assert live.client.get_training_session(session.id).status.short == "STOPPED"
    live.resources.delete(resource.id, {**adopted.outs, "delete_timeout": acc.STOP_TIMEOUT})
    assert live.client.get_model_resource(resource.id).status.short in ("STOPPING", "STOPPED")
    assert billed.spent() <= settings.ready + acc.STOP_ALLOWANCE, (
        f"READY for {billed.spent():.0f} s, more than the {settings.ready:.0f} s (+ the stop) the plan priced"
    )


# ------------------------------------------------------------------------------------------------- helpers


def _listed(tmp_path: Path, *argv: str) -> dict[str, dict[str, Any]]:
    """``python -m pulumi_together_rl orphans --json ARGV`` in this process (a dry run): the orphans by id."""
    out, err = io.StringIO(), io.StringIO()
    args = build_parser().parse_args(["orphans", "--json", "--cwd", str(tmp_path), *argv])
    code = orphans.run(args, stdout=out, stderr=err)
    assert code == 0, err.getvalue()
    return {item["id"]: item for item in json.loads(out.getvalue())}


def _listed_until(
    done: Any, deadline: acc.Deadline, tmp_path: Path, *argv: str, pause: float = 2.0
) -> dict[str, dict[str, Any]]:
    """:func:`_listed` again until ``done(listing)`` (a list may lag a create by a few seconds), within
    ``deadline``."""
    while True:
        listed = _listed(tmp_path, *argv)
        if done(listed) or deadline.left() <= pause:
            assert done(listed), f"not listed within {deadline.seconds:.0f} s: {sorted(listed)}"
            return listed
        time.sleep(pause)


def _state_holding(tmp_path: Path, ident: str) -> str:
    """A ``pulumi stack export`` file (the CLI's shape) of a stack whose state holds model resource ``ident``."""
    stack, project = "acceptance", "acceptance"
    document = {
        "version": 3,
        "deployment": {
            "manifest": {"version": "v3.274.1"},
            "resources": [
                {
                    "urn": f"urn:pulumi:{stack}::{project}::pulumi:pulumi:Stack::{project}-{stack}",
                    "custom": False,
                    "type": "pulumi:pulumi:Stack",
                },
                {
                    "urn": f"urn:pulumi:{stack}::{project}::{RESOURCE_TYPE}::gpu",
                    "custom": True,
                    "id": ident,
                    "type": RESOURCE_TYPE,
                    "inputs": {},
                    "outputs": {"__provider": "opaque"},
                },
            ],
        },
    }
    path = tmp_path / "holding.json"
    path.write_text(json.dumps(document))
    return str(path)
