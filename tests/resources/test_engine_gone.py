"""What a provider process does when its engine dies, with real processes and real signals: a provider (a
``python`` process serving creates as the dynamic face does) under an "engine" (its parent process), which the
test kills with SIGKILL. And what a later process of the same declaration does with a create that answered."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time

from harness.journals import entries

from pulumi_together_rl import lifeline

from .conftest import MODEL, OWNER
from .test_create_journal import RESOURCES, active

PROVIDER = textwrap.dedent(
    """
    import json, os, sys, threading
    from pulumi_together_rl import config, lifeline
    from pulumi_together_rl.resources.model_resource import _ModelResourceProvider

    config.configure({"together:apiKey": os.environ["KEY"], "together:baseUrl": os.environ["URL"]})
    lifeline.watch()  # what configure() does in the provider server
    provider = _ModelResourceProvider()

    def create(owner):
        checked = provider.check({}, {"base_model": os.environ["MODEL"], "owner": owner})
        made = provider.create(checked.inputs)
        print(json.dumps({"id": made.id}), flush=True)

    first = threading.Thread(target=create, args=(os.environ["OWNER"],))
    first.start()
    if os.environ.get("SECOND"):
        sys.stdin.readline()  # the test says when
        second = threading.Thread(target=create, args=(os.environ["SECOND"],))
        second.start()
        second.join()
    first.join()
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


def _wait(predicate, what: str, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.02)


def test_an_engine_killed_during_a_post_leaves_every_create_of_the_provider_for_the_next_run(rig):
    """Create A waits for READY and create B's POST is in flight when the engine dies. The provider waits for
    B's answer, so B's id is recorded; A, which reaches READY meanwhile, is left for the next run with its id
    (nobody got its answer), never marked done; nothing is stopped. The next run takes both over by id."""
    rig.control.configure(timings={"resource_pending": 3.0})
    env = {**_env(rig, OWNER + "gpu-a"), "SECOND": OWNER + "gpu-b"}
    engine = subprocess.Popen(
        [sys.executable, "-c", ENGINE, PROVIDER],
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    provider = int(engine.stdout.readline())
    _wait(lambda: any(e.entry.id for e in entries()), "A's POST to answer")
    rig.control.add_fault(method="POST", path=f"^{RESOURCES}$", status=None, latency=6.0, times=1)
    engine.stdin.write("go\n")
    engine.stdin.flush()
    _wait(lambda: any(e.entry.sends and not e.entry.id for e in entries()), "B's POST to be sent")
    engine.kill()  # SIGKILL: the engine is gone; B's POST in flight, A waiting for READY
    engine.wait()

    _wait(lambda: _gone(provider), "the provider to exit", timeout=60)
    made = set(active(rig, "model_resources"))
    left = {s.entry.owner.rsplit("/", 1)[-1]: s.entry for s in entries()}
    assert {e.id for e in left.values()} == made and len(made) == 2
    assert all((e.state, e.note) == ("created", lifeline.GONE_NOTE) for e in left.values()), left
    assert not [r for r in rig.control.requests() if r["path"].endswith("/stop")]

    rig.control.configure(timings={"resource_pending": 0.0})
    rig.control.clear_requests()
    taken = {rig.create_resource(owner=OWNER + name).id for name in ("gpu-a", "gpu-b")}
    assert taken == made and rig.posts(RESOURCES) == []  # the next run takes both over by id


def test_a_create_that_answered_is_never_taken_over_by_another_process_of_the_declaration(rig):
    """A done record: its create reached its engine, so its state holds the object. Another process of the
    same declaration (a namesake stack run later, or the same stack after the object was removed from state on
    purpose) makes its own: a done record is a claim, never something to take over."""
    first = rig.create_resource()
    [done] = [s.entry for s in entries()]
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
