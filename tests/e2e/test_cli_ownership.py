"""Ownership through the real CLI: what an interrupted `pulumi up` made is taken over by that declaration only.

A team shares one Together account, so look-alike objects are the normal case. Every test here is judged by what
the emulator holds and what each stack's state records: real stacks (separate `pulumi` processes, one backend,
one journal folder as on one machine), real signals (SIGKILL of the provider, of the `pulumi` CLI, of a pid
namespace's init), real look-alikes (another stack's create of the same request, a colleague's POST by hand).

Each scenario runs on one face (the ownership rule is the shared core's; the faces alternate so that both stay
covered): what only the CLI shows is what its engine leaves (a lock, a pending create), how the provider finds
its `pulumi` process, the stack's backend as the CLI gives it, and what a person reads. The rules themselves are
guarded without the CLI in ``tests/resources/test_create_journal.py`` and ``test_journal_proof.py``; what a
provider does when its engine dies (killed, or a zombie), and twins and take-overs after a killed provider, with
real processes against the stand-in engine in ``tests/engine/test_interrupts.py`` and ``test_take_over.py``.
"""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

import httpx
import pytest
from harness.cli import ROOT, active, processes_of, provider_pids, wait_until
from harness.faces import DYNAMIC, PLUGIN

from pulumi_together_rl import lifeline
from pulumi_together_rl.ownership import journal
from pulumi_together_rl.ownership.records import Entry, Process
from pulumi_together_rl.ownership.stores.folder import FolderStore

SWEEP = ROOT / "examples" / "sweep"
RESOURCES = "/v1/rl/model-resources"
REQUEST = {
    "base_model": "Qwen/Qwen3.5-4B",
    "compute_config": {"num_generator_replicas": 1},
    "lora_enabled": True,
}
"""The sweep example's model resource, as its create sends it."""


def entries(state_dir: str) -> list[Entry]:
    """What the journal in ``state_dir`` (a stack's ``TOGETHER_RL_STATE_DIR``) holds now."""
    folder = FolderStore(Path(state_dir) / "journal")
    return [s.entry for s in journal.Journal(folder, None, legacy=True).entries(warn=None)]


def resources(emulator) -> list[dict]:
    return emulator.control.state()["model_resources"]


def kill_provider_during(stack, emulator, *, created: int = 1, when=None, what: str = "the create") -> None:
    """`pulumi up` of ``stack``; once ``when()`` holds (default: ``created`` model resources exist, then a
    second well inside the wait), SIGKILL its provider; wait for the CLI to end and the provider to be gone."""
    process = stack.popen("up", "--yes", "--skip-preview")
    state_dir = stack.env["TOGETHER_RL_STATE_DIR"]
    try:
        if when is not None:
            wait_until(when, 120, what)
        else:
            wait_until(lambda: len(resources(emulator)) >= created, 120, what)
            time.sleep(1.0)  # well inside the wait
        for pid in wait_until(lambda: provider_pids(state_dir, stack.face), 30, "the provider"):
            os.kill(pid, signal.SIGKILL)
        process.communicate(timeout=240)
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.communicate()
    wait_until(lambda: not provider_pids(state_dir, stack.face), 60, "the old provider to exit")


def posting(stack, emulator, fault: str) -> bool:
    """Whether ``stack``'s model-resource create has sent its POST and has no answer yet: its entry records the
    send (written before the POST goes out) and the emulator holds the POST in ``fault``'s latency (a kill between
    the two would leave no POST at all)."""
    arrived = any(f["id"] == fault and f["fired"] for f in emulator.control.faults())
    return arrived and any(
        e.kind == "model resource" and e.sends and not e.id
        for e in entries(stack.env["TOGETHER_RL_STATE_DIR"])
    )


def post_by_hand(emulator, body: dict) -> str:
    answer = httpx.post(
        emulator.base_url + RESOURCES,
        json=body,
        headers={"Authorization": f"Bearer {emulator.api_key}"},
        timeout=10,
    )
    answer.raise_for_status()
    return answer.json()["id"]


def held(stack) -> set[str]:
    return {r["id"] for r in stack.resources().values() if r.get("id")}


def test_sigkill_of_the_cli_mid_create_converges_with_one_object_and_names_the_commands(cli_stack, emulator):
    """A CI runner's hard cancel: the CLI dies, its plugin (own process group) would keep waiting for an hour.
    It notices, keeps the entry with the id and exits; the re-run takes the object over by id. (The dynamic
    face: its plugin runs under a launcher script that outlives the CLI; the plugin face's zombie test below.)"""
    face = DYNAMIC
    emulator.control.configure(timings={"resource_pending": 15.0})
    stack = cli_stack("sweep", face=face).init({"sessions": 1, "loraRanks": [8]})
    state_dir = stack.env["TOGETHER_RL_STATE_DIR"]
    process = stack.popen("up", "--yes", "--skip-preview")
    wait_until(lambda: resources(emulator), 120, "the create")
    wait_until(lambda: provider_pids(state_dir, face), 30, "the provider")
    time.sleep(1.0)
    os.kill(process.pid, signal.SIGKILL)  # the CLI itself, nothing else
    process.communicate()

    wait_until(lambda: not provider_pids(state_dir, face), 15, "the orphaned provider to notice and exit")
    for pid in processes_of(stack):  # the language host the killed CLI left (not ours to test)
        os.kill(pid, signal.SIGKILL)
    [entry] = [e for e in entries(state_dir) if e.kind == "model resource"]
    [made] = resources(emulator)
    assert (entry.id, entry.state, entry.note) == (made["id"], "created", lifeline.GONE_NOTE)

    locked = stack.up(check=False)
    assert locked.returncode != 0 and "pulumi cancel" in locked.output  # the engine's own lock
    stack.run("cancel", "--yes")
    rerun = stack.up()
    assert "taking it over" in rerun.output
    assert "pulumi cancel" in rerun.output and "pulumi refresh --clear-pending-creates" in rerun.output
    assert [r["id"] for r in resources(emulator)] == [made["id"]]  # never a second allocation
    assert stack.resources()["sweep-gpu"]["id"] == made["id"]

    pending = json.loads(stack.export())["deployment"].get("pending_operations") or []
    assert [p["type"] for p in pending] == ["creating"]  # what the killed engine left, until cleared
    stack.run("refresh", "--clear-pending-creates", "--yes")
    assert not json.loads(stack.export())["deployment"].get("pending_operations")
    stack.preview("--expect-no-changes")
    stack.destroy()
    assert active(emulator) == {"model_resources": [], "training_sessions": []}


def _zombie(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rindex(")") + 2 :].split()[0] == "Z"


def test_a_killed_cli_that_nobody_reaps_is_gone_to_its_provider(cli_stack, emulator):
    """A CI supervisor that never waits for its children: the killed `pulumi` stays a zombie (same pid, same start
    time) for as long as its parent lives. The provider must take it for gone: keep the entry with the id and exit,
    never finish the create as if answered (the next run would make a second GPU) nor stop the healthy GPU. (The
    plugin face; the dynamic face's zombie engine is the stand-in engine's, tests/engine/test_interrupts.py.)"""
    face = PLUGIN
    emulator.control.configure(timings={"resource_pending": 15.0})
    stack = cli_stack("sweep", face=face).init({"sessions": 1, "loraRanks": [8]})
    state_dir = stack.env["TOGETHER_RL_STATE_DIR"]
    process = stack.popen("up", "--yes", "--skip-preview")  # this test is its parent, and does not reap it
    wait_until(lambda: resources(emulator), 120, "the create")
    wait_until(lambda: provider_pids(state_dir, face), 30, "the provider")
    time.sleep(1.0)
    os.kill(process.pid, signal.SIGKILL)
    wait_until(lambda: _zombie(process.pid), 10, "the killed CLI to be a zombie")

    wait_until(lambda: not provider_pids(state_dir, face), 20, "the provider to take the zombie for gone")
    assert _zombie(process.pid)  # still unreaped while the provider decided
    [entry] = [e for e in entries(state_dir) if e.kind == "model resource"]
    [made] = resources(emulator)
    assert (entry.id, entry.state, entry.note) == (made["id"], "created", lifeline.GONE_NOTE)
    assert not [r for r in emulator.control.requests() if r["path"].endswith("/stop")]  # the GPU left alone

    process.communicate()  # reaped at last
    for pid in processes_of(stack):  # the language host the killed CLI left
        os.kill(pid, signal.SIGKILL)
    stack.run("cancel", "--yes")
    emulator.control.configure(timings={"resource_pending": 0.0})
    stack.up()
    assert [r["id"] for r in resources(emulator)] == [made["id"]]  # taken over, never a second GPU
    assert stack.resources()["sweep-gpu"]["id"] == made["id"]
    stack.destroy()


def test_a_namesake_stack_in_another_backend_never_takes_the_gpu_an_interrupted_up_left(
    cli_stack, emulator, tmp_path
):
    """A developer's local backend next to the team's, one machine, one journal, the same project, stack and
    resource names: the team stack's `up` is killed while its GPU provisions; the local namesake's `up` makes its
    own GPU; the team stack's next `up` takes its own over. (The plugin face: the backend as the CLI gives it to
    its plugin; the rule, test_journal_proof.py.)"""
    face = PLUGIN
    shared = str(tmp_path / "one-machine-state")
    emulator.control.configure(timings={"resource_pending": 15.0})
    team = cli_stack("sweep", face=face, TOGETHER_RL_STATE_DIR=shared).init({"sessions": 1, "loraRanks": [8]})
    local = cli_stack("sweep", face=face, name=team.name, TOGETHER_RL_STATE_DIR=shared)
    local.init({"sessions": 1, "loraRanks": [8]})
    assert local.backend != team.backend and local.name == team.name

    kill_provider_during(team, emulator)
    [made] = resources(emulator)
    emulator.control.configure(timings={"resource_pending": 0.0})

    result = local.up()
    assert "taking it over" not in result.output
    theirs = local.resources()["sweep-gpu"]["id"]
    assert theirs != made["id"] and len(resources(emulator)) == 2

    team.up()
    assert team.resources()["sweep-gpu"]["id"] == made["id"]  # its own, taken over
    assert {o["id"] for o in active(emulator)["model_resources"]} == {made["id"], theirs}
    local.preview("--expect-no-changes")
    team.destroy()
    assert {o["id"] for o in active(emulator)["model_resources"]} == {
        theirs
    }  # the team's destroy stopped its own
    local.destroy()


def test_two_stacks_with_the_same_request_each_keep_their_own(cli_stack, emulator, tmp_path):
    """Stack A is killed while its POST is in flight (its entry has no id); stack B, same machine and request,
    creates meanwhile. A's re-run finds its own by a strict unique match: B's is claimed by B's record. (The
    dynamic face; the rule, test_create_journal.py.)"""
    face = DYNAMIC
    shared = str(tmp_path / "one-machine-state")
    emulator.control.configure(timings={"resource_pending": 1.0})
    a = cli_stack("sweep", face=face, TOGETHER_RL_STATE_DIR=shared).init({"sessions": 1, "loraRanks": [8]})
    b = cli_stack("sweep", face=face, TOGETHER_RL_STATE_DIR=shared).init({"sessions": 1, "loraRanks": [8]})
    fault = emulator.control.add_fault(
        method="POST", path=f"^{RESOURCES}$", status=None, latency=6.0, times=1
    )

    kill_provider_during(a, emulator, when=lambda: posting(a, emulator, fault), what="A's POST to be sent")
    b.up()
    wait_until(lambda: len(resources(emulator)) == 2, 30, "A's delayed POST to land")
    assert "sweep-gpu" not in a.resources()

    a.up()

    assert len(resources(emulator)) == 2  # A's own was taken over, not made again
    a_gpu, b_gpu = a.resources()["sweep-gpu"]["id"], b.resources()["sweep-gpu"]["id"]
    assert a_gpu != b_gpu
    assert {o["id"] for o in active(emulator)["model_resources"]} == {a_gpu, b_gpu}
    b.preview("--expect-no-changes")  # B was never touched
    a.destroy()
    assert {o["id"] for o in active(emulator)["model_resources"]} == {b_gpu}  # A's destroy stopped only A's
    assert len(active(emulator)["training_sessions"]) == 1
    b.destroy()


def test_a_look_alike_posted_by_hand_at_the_same_moment_is_never_taken(cli_stack, emulator):
    """A colleague makes the identical resource by hand while A's POST is in flight and A is killed: A's
    re-run cannot tell which is its own, touches nothing, and says what it found, in the schema's names. (The
    plugin face; the rule, test_create_journal.py.)"""
    face = PLUGIN
    emulator.control.configure(timings={"resource_pending": 1.0})
    a = cli_stack("sweep", face=face).init({"sessions": 1, "loraRanks": [8]})
    fault = emulator.control.add_fault(
        method="POST", path=f"^{RESOURCES}$", status=None, latency=4.0, times=1
    )

    kill_provider_during(a, emulator, when=lambda: posting(a, emulator, fault), what="A's POST to be sent")
    colleagues = post_by_hand(emulator, REQUEST)
    wait_until(lambda: len(resources(emulator)) == 2, 30, "A's delayed POST to land")
    before = {r["id"] for r in resources(emulator)}
    emulator.control.clear_requests()

    rerun = a.up(check=False)

    assert rerun.returncode != 0
    assert colleagues in rerun.output and "none can be proven" in rerun.output
    assert face.field("adopt_id") in rerun.output
    assert "Traceback" not in rerun.output
    posts = [r for r in emulator.control.requests() if r["method"] == "POST"]
    assert [p["path"] for p in posts if p["path"] == RESOURCES] == []  # nothing made
    assert all(not p["path"].endswith("/stop") for p in posts)  # nothing stopped
    assert {o["id"] for o in active(emulator)["model_resources"]} == before


def test_a_post_the_api_answered_as_failed_never_hands_the_stack_a_colleagues_gpu(cli_stack, emulator):
    """No interrupt at all: the API answers the stack's POST with its own 503 while a colleague's identical POST
    lands. The stack's `up` names the colleague's GPU and takes nothing, and its `destroy` stops nothing of it."""
    stack = cli_stack(SWEEP).init({"sessions": 1, "loraRanks": [8]})
    fault = emulator.control.add_fault(method="POST", path=f"^{RESOURCES}$", status=503, latency=3.0, times=1)
    process = stack.popen("up", "--yes", "--skip-preview")
    wait_until(lambda: posting(stack, emulator, fault), 120, "the stack's POST to be sent")
    colleagues = post_by_hand(emulator, REQUEST)
    out, err = process.communicate(timeout=300)

    assert process.returncode != 0
    assert colleagues in out + err and "the API itself answered that the create failed" in out + err
    assert "sweep-gpu" not in stack.resources()
    stack.run("destroy", "--yes", "--skip-preview")
    assert not [r for r in emulator.control.requests() if r["path"].endswith(f"{colleagues}/stop")]
    assert [o["id"] for o in active(emulator)["model_resources"]] == [colleagues]


def _namespace_init(unshare_pid: int) -> int:
    """The first process of the pid namespace ``unshare --fork`` made (its child: pid 1 inside)."""
    children = Path(f"/proc/{unshare_pid}/task/{unshare_pid}/children")
    return int(wait_until(lambda: children.read_text().split(), 10, "the namespace's init")[0])


@pytest.mark.parametrize("rounds", [2])
def test_runs_in_fresh_pid_namespaces_take_over_what_a_killed_one_made(cli_stack, emulator, rounds):
    """Each `pulumi up` in a pid namespace of its own, as in a container: the same pids come back in every
    run, so a pid proves nothing. Killing the namespace's init (the CLI) kills everything in it."""
    emulator.control.configure(timings={"resource_pending": 15.0})
    stack = cli_stack(SWEEP).init({"sessions": 1, "loraRanks": [8]})
    container = ("unshare", "--pid", "--fork", "--mount-proc")
    for _ in range(rounds - 1):
        process = stack.popen("up", "--yes", "--skip-preview", prefix=container)
        try:
            wait_until(lambda: resources(emulator), 120, "the create")
            time.sleep(1.0)
            os.kill(_namespace_init(process.pid), signal.SIGKILL)  # the container goes down, all in it
            process.communicate(timeout=60)
            assert not processes_of(stack)
        finally:
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGKILL)
                process.communicate()
        stack.run("cancel", "--yes")  # the lock its engine left
    [entry] = [e for e in entries(stack.env["TOGETHER_RL_STATE_DIR"]) if e.kind == "model resource"]
    assert entry.process.namespace != Process.this().namespace

    emulator.control.configure(timings={"resource_pending": 0.0})
    stack.up(prefix=container)

    [made] = resources(emulator)
    assert stack.resources()["sweep-gpu"]["id"] == made["id"] == entry.id
    stack.destroy()


def test_an_unreadable_object_in_the_api_list_fails_nothing_and_stops_nothing(cli_stack, emulator):
    emulator.control.set_list_extras("model-resources", [{"id": "mr-from-the-future", "status": 7}])
    emulator.control.set_list_extras("training-sessions", [{"id": "ts-from-the-future", "created_at": None}])
    stack = cli_stack(SWEEP).init({"sessions": 2, "loraRanks": [8]})
    emulator.control.clear_requests()

    result = stack.up()

    assert not [r for r in emulator.control.requests() if r["path"].endswith("/stop")]
    now = active(emulator)
    assert len(now["model_resources"]) == 1 and len(now["training_sessions"]) == 2
    diagnostics = result.stdout.split("Diagnostics:", 1)[1].split("Outputs:", 1)[0]
    assert (
        diagnostics.count("skipped model resource mr-from-the-future") == 1
    )  # one warning, not one per tick
    assert held(stack) >= {o["id"] for o in now["model_resources"] + now["training_sessions"]}
    stack.destroy()
