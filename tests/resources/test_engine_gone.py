"""What a provider process does when its engine dies, with real processes and real signals: a provider (a
``python`` process serving creates as the dynamic face does) under an "engine" (its parent process), which the
test kills with SIGKILL. And what a later process of the same declaration does with a create that answered."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time

from pulumi_together_rl import journal, lifeline

from .conftest import MODEL, OWNER
from .test_create_journal import RESOURCES, active

PROVIDER = textwrap.dedent(
    """
    import json, os, sys
    from pulumi_together_rl import config, lifeline
    from pulumi_together_rl.resources.model_resource import _ModelResourceProvider

    config.configure({"together:apiKey": os.environ["KEY"], "together:baseUrl": os.environ["URL"]})
    lifeline.watch()  # what configure() does in the provider server
    provider = _ModelResourceProvider()
    checked = provider.check({}, {"base_model": os.environ["MODEL"], "owner": os.environ["OWNER"]})
    print("creating", flush=True)
    made = provider.create(checked.inputs)
    print(json.dumps({"id": made.id}), flush=True)
    """
)

ENGINE = textwrap.dedent(
    """
    import subprocess, sys
    provider = subprocess.Popen([sys.executable, "-c", sys.argv[1]])
    print(provider.pid, flush=True)
    provider.wait()
    """
)


def _env(rig, owner: str) -> dict[str, str]:
    return {
        **os.environ,
        "KEY": rig.emulator.api_key,
        "URL": rig.emulator.base_url,
        "MODEL": MODEL,
        "OWNER": owner,
        "TOGETHER_RL_POLL_INTERVAL": "0.05",
    }


def _gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


def test_an_engine_killed_during_the_post_leaves_the_answered_id_recorded_not_done(rig):
    """The POST is in flight when the engine dies: the provider waits for its answer (so the id is recorded),
    the create that then finishes is left for the next run (nobody got the answer), never marked done."""
    rig.control.add_fault(method="POST", path=f"^{RESOURCES}$", status=None, latency=3.0, times=1)
    engine = subprocess.Popen(
        [sys.executable, "-c", ENGINE, PROVIDER],
        env=_env(rig, OWNER + "gpu"),
        stdout=subprocess.PIPE,
        text=True,
    )
    provider = int(engine.stdout.readline())
    deadline = time.monotonic() + 30
    while not any(e.sends and not e.id for e in journal.entries(warn=None)):
        assert time.monotonic() < deadline, "the provider never sent its POST"
        time.sleep(0.02)
    engine.kill()  # SIGKILL: the engine is gone, its POST still in flight in the provider
    engine.wait()

    deadline = time.monotonic() + 40
    while not _gone(provider):
        assert time.monotonic() < deadline, "the provider never exited"
        time.sleep(0.1)
    [made] = active(rig, "model_resources")
    [entry] = journal.entries(warn=None)
    assert (entry.id, entry.state, entry.note) == (made, "created", lifeline.GONE_NOTE)
    assert not [r for r in rig.control.requests() if r["path"].endswith("/stop")]

    taken = rig.create_resource()  # the next run takes it over by id
    assert taken.id == made and len(rig.posts(RESOURCES)) == 1


def test_a_create_that_answered_is_never_taken_over_by_another_process_of_the_declaration(rig):
    """A done record: its create reached its engine, so its state holds the object. Another process of the
    same declaration (a namesake stack run later, or the same stack after the object was removed from state on
    purpose) makes its own: a done record is a claim, never something to take over."""
    first = rig.create_resource()
    [done] = journal.entries(warn=None)
    assert done.state == "done" and done.id == first.id

    later = subprocess.run(
        [sys.executable, "-c", PROVIDER],
        env=_env(rig, OWNER + "gpu"),
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )

    second = later.stdout.strip().splitlines()[-1]
    assert first.id not in second and len(rig.posts(RESOURCES)) == 2
    assert len(active(rig, "model_resources")) == 2 and "taking it over" not in later.stderr
