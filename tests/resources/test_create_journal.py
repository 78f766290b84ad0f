"""The create journal through the providers: what an interrupted create of a declaration made is taken over by
that declaration, never made twice, and never taken from anyone else.

An entry left by a run that is gone is what such a run leaves in the journal (:func:`harness.journals.left`): its
snapshot, sends and (maybe) id, its lease released. Where a test needs a live holder or a holder that dies, it is a
real process (a child that takes the entry's lock and is killed with SIGKILL). The real-signal tests through the
CLI are in tests/e2e/test_cli_interrupts.py and tests/e2e/test_cli_ownership.py.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import types
from datetime import datetime, timedelta, timezone

import httpx
import pytest
from harness.journals import hold, left, unfinished

from pulumi_together_rl.client.models import ModelResourceCreateRequest, TrainingSessionCreateRequest
from pulumi_together_rl.lifeline import GONE_NOTE
from pulumi_together_rl.messages import UserError, command
from pulumi_together_rl.ownership import journal
from pulumi_together_rl.ownership.journal import Journal
from pulumi_together_rl.ownership.records import State

from .conftest import LIST_LAG_HERE, MODEL, OWNER

RESOURCES = "/v1/rl/model-resources"
SESSIONS = "/v1/rl/training-sessions"
GPU = OWNER + "gpu"
REQUEST = ModelResourceCreateRequest(base_model=MODEL)


# Where the journal is: every behaviour holds in this machine's folder and in a bucket shared by machines, but
# those that name the folder's own files (an unwritable folder, files of earlier releases at its top level).
FOLDER_ONLY = {
    "test_an_unwritable_journal_folder_fails_before_the_post_naming_the_folder",
    "test_malformed_entries_are_skipped_with_one_warning_naming_the_file",
    "test_a_v1_entry_of_an_older_release_is_never_taken_over",
}


def pytest_generate_tests(metafunc):
    if "journal_at" in metafunc.fixturenames:
        places = ["folder"] if metafunc.function.__name__ in FOLDER_ONLY else ["folder", "bucket"]
        metafunc.parametrize("journal_at", places)


@pytest.fixture(autouse=True)
def journal_at(request):
    """``folder`` or ``bucket`` (the journal in a bucket of a loopback S3 server)."""
    if request.param == "bucket":
        request.getfixturevalue("journal_in_bucket")
    return request.param


def left_entry(
    rig, request, owner=GPU, *, ident=None, sent=True, kind="model resource", base_url=None, **more
):
    """The entry a run that is gone left: its snapshot (the objects active now) and a send recorded, the id if its
    POST answered; its lease released (:func:`harness.journals.left`)."""
    return left(kind, base_url or rig.emulator.base_url, request.to_wire(), owner, snapshot=active_ids(rig),
                sent=sent, ident=ident, **more)  # fmt: skip


def active_ids(rig) -> list[str]:
    gone = ("STOPPING", "STOPPED", "ERROR", "EXPIRED")
    state = rig.control.state()
    return [o["id"] for key in state if isinstance(state[key], list) for o in state[key] if isinstance(o, dict)
            and "status" in o and not o["status"].endswith(gone)]  # fmt: skip


def active(rig, key):
    gone = ("STOPPING", "STOPPED", "ERROR")
    return [o["id"] for o in rig.control.state()[key] if not o["status"].endswith(gone)]


def post_by_hand(rig, path, body) -> dict:
    """A POST this process's client never saw: another run's, or a colleague's."""
    answer = httpx.post(
        rig.emulator.base_url + path,
        json=body,
        headers={"Authorization": f"Bearer {rig.emulator.api_key}"},
        timeout=10,
    )
    answer.raise_for_status()
    return answer.json()


def made_elsewhere(rig, path=RESOURCES, request=REQUEST):
    """An object another process made (its POST is not this process's: this process never claimed it)."""
    return types.SimpleNamespace(**post_by_hand(rig, path, request.to_wire()))


# ------------------------------------------------------------------------------------------- the record


def test_every_create_leaves_a_done_record_and_nothing_unfinished(rig):
    created = rig.create_resource()
    session = rig.create_session(created.id, lora_config={"rank": 8})
    assert unfinished() == []
    done = {e.entry.id: e.entry for e in journal.current().entries()}
    assert set(done) == {created.id, session.id}
    assert done[created.id].owner == GPU and done[created.id].state == "done"
    assert done[created.id].snapshot == [] and len(done[created.id].sends) == 1


# ---------------------------------------------------------------------------------------- by id: proof


def test_an_object_an_interrupted_create_of_this_declaration_made_is_taken_over_not_made_again(rig, capsys):
    made = made_elsewhere(rig)  # what the interrupted run's POST made
    left_entry(rig, REQUEST, ident=made.id)
    rig.control.clear_requests()

    created = rig.create_resource()

    assert created.id == made.id
    assert rig.posts(RESOURCES) == []
    assert active(rig, "model_resources") == [made.id]
    assert (
        "taking it over: an interrupted `pulumi up` of this declaration created it" in capsys.readouterr().err
    )
    assert unfinished() == []


def test_another_declarations_interrupted_object_is_never_taken_even_with_the_same_request(rig):
    """Another stack (or another resource of this stack) made it: its entry is no proof for this one."""
    theirs = made_elsewhere(rig)
    left_entry(rig, REQUEST, owner="organization/test/prod/gpu", ident=theirs.id)
    twin = made_elsewhere(rig)
    left_entry(rig, REQUEST, owner=OWNER + "gpu-2", ident=twin.id)

    created = rig.create_resource()

    assert created.id not in (theirs.id, twin.id)
    assert len(rig.posts(RESOURCES)) == 3
    assert sorted(e.entry.id for e in unfinished()) == sorted([theirs.id, twin.id])  # left for their owners


def test_an_interrupted_create_against_another_api_is_never_taken_over(rig):
    made = made_elsewhere(rig)
    left_entry(rig, REQUEST, ident=made.id, base_url="https://api.together.ai")

    created = rig.create_resource()

    assert created.id != made.id
    assert [e.entry.id for e in unfinished()] == [made.id]


def test_twins_interrupted_together_each_take_over_their_own(rig):
    """Two identical declarations of one stack, both interrupted during their waits: each gets its own id."""
    first = made_elsewhere(rig)
    second = made_elsewhere(rig)
    left_entry(rig, REQUEST, owner=OWNER + "gpu-a", ident=first.id)
    left_entry(rig, REQUEST, owner=OWNER + "gpu-b", ident=second.id)
    rig.control.clear_requests()

    a = rig.create_resource(owner=OWNER + "gpu-a")
    b = rig.create_resource(owner=OWNER + "gpu-b")

    assert (a.id, b.id) == (first.id, second.id)
    assert rig.posts(RESOURCES) == []


def test_an_interrupted_create_whose_object_is_gone_is_dropped_and_a_new_one_made(rig, capsys):
    made = made_elsewhere(rig)
    rig.client.stop_model_resource(made.id)
    left_entry(rig, REQUEST, ident=made.id)

    created = rig.create_resource()

    assert created.id != made.id
    assert "it is STOPP" in capsys.readouterr().err
    assert unfinished() == []


def test_an_entry_a_running_process_holds_is_left_alone(rig, monkeypatch):
    """A create in flight elsewhere (a live process renews its lease): never taken, and nothing made beside it;
    the create waits a bounded time for the lease, then refuses naming it."""
    monkeypatch.setenv("TOGETHER_RL_LEASE_SECONDS", "2")
    made = made_elsewhere(rig)
    entry = left_entry(rig, REQUEST, ident=made.id)
    holder = hold(entry)
    rig.control.clear_requests()
    try:
        with pytest.raises(UserError, match="another run is creating this declaration now") as caught:
            rig.create_resource()
    finally:
        holder.kill()
        holder.wait()
    assert made.id in str(caught.value) and "nothing was created" in str(caught.value)
    assert rig.posts(RESOURCES) == []
    assert [e.entry.id for e in unfinished()] == [made.id]


def test_an_entry_whose_taker_was_killed_stays_visible_and_the_next_run_takes_it_over(rig):
    """A run killed (SIGKILL) while it held the entry for its take-over: the entry is still there."""
    made = made_elsewhere(rig)
    entry = left_entry(rig, REQUEST, ident=made.id)
    taker = hold(entry)
    os.kill(taker.pid, signal.SIGKILL)
    taker.wait()
    assert [e.entry.id for e in unfinished()] == [made.id]
    rig.control.clear_requests()

    assert rig.create_resource().id == made.id
    assert rig.posts(RESOURCES) == []


def test_an_entry_older_than_the_age_limit_is_not_taken_over(rig, monkeypatch):
    """Its age is the store's: the store's clock a day past its last write (whatever the writer's clock said)."""
    made = made_elsewhere(rig)
    left_entry(rig, REQUEST, ident=made.id, started_at=datetime.now(timezone.utc) + timedelta(days=3))
    store_now = Journal.now
    monkeypatch.setattr(Journal, "now", lambda self: store_now(self) + journal.MAX_AGE + timedelta(minutes=1))

    created = rig.create_resource()

    assert created.id != made.id
    assert [e.entry.id for e in unfinished()] == [made.id]  # left for the orphan finder


def test_a_v1_entry_of_an_older_release_is_never_taken_over(rig, capsys):
    """It names no declaration, so it proves nothing: it is not read at all (one line names it)."""
    made = made_elsewhere(rig)
    folder = journal.directory()
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "legacy.json").write_text(
        json.dumps(
            {
                "kind": "model resource",
                "base_url": rig.emulator.base_url,
                "body": REQUEST.to_wire(),
                "key": "x",
                "started_at": datetime.now(timezone.utc).isoformat(),
                "pid": 999999,
                "id": made.id,
            }
        )
    )
    assert rig.create_resource().id != made.id
    assert err_names(capsys, folder / "legacy.json")


# ------------------------------------------------------------------------------- no id: a strict match


def test_a_create_killed_before_its_answer_is_found_by_a_strict_unique_match(rig, capsys):
    resource = rig.create_resource()
    request = TrainingSessionCreateRequest(model_resources_id=resource.id, display_name="exp")
    left_entry(rig, request, owner=OWNER + "trial", kind="training session")
    made = post_by_hand(rig, SESSIONS, request.to_wire())  # the interrupted run's POST: its answer was lost
    rig.control.clear_requests()

    session = rig.create_session(resource.id, display_name="exp")

    assert session.id == made["id"]
    assert rig.posts(SESSIONS) == []
    line = capsys.readouterr().err
    assert "asked for one and never got the answer; this one is taken by a match, not an answer" in line
    assert " ago," in line and "after that POST was sent" in line
    assert unfinished() == []


def test_two_look_alikes_inside_the_window_are_ambiguous_nothing_is_taken_and_nothing_posted(rig):
    entry = left_entry(rig, REQUEST)
    ours = post_by_hand(rig, RESOURCES, REQUEST.to_wire())
    colleagues = post_by_hand(rig, RESOURCES, REQUEST.to_wire())  # made by hand at the same moment
    rig.control.clear_requests()

    with pytest.raises(UserError) as caught:
        rig.create_resource()

    message = str(caught.value)
    assert ours["id"] in message and colleagues["id"] in message
    assert (
        "none can be proven" in message
        and "adopt_id" in message
        and f"journal dismiss {entry.name}" in message
    )
    assert "USD/h" in message  # what each costs
    assert rig.posts(RESOURCES) == []
    assert sorted(active(rig, "model_resources")) == sorted([ours["id"], colleagues["id"]])  # nothing stopped
    assert [e.key for e in unfinished()] == [entry.key]


def test_a_look_alike_made_long_after_the_interrupted_post_is_someone_elses(rig):
    """A colleague's identical resource made hours after the interrupted POST (which made nothing)."""
    entry = left_entry(rig, REQUEST)
    rig.control.advance(3 * 3600)  # the API's clock moves on: what is made now is hours younger
    colleagues = post_by_hand(rig, RESOURCES, REQUEST.to_wire())

    created = rig.create_resource()

    assert created.id != colleagues["id"]
    kept = unfinished()
    assert [e.key for e in kept] == [entry.key] and "nothing it could have made was found" in kept[
        0
    ].entry.note


def test_a_resource_differing_only_in_a_default_is_not_taken(rig):
    """An unset optimizer is Adam: a Muon resource made in the window is not this create's."""
    left_entry(rig, REQUEST)
    muon = post_by_hand(rig, RESOURCES, {"base_model": MODEL, "optimizer_config": {"muon": {}}})

    created = rig.create_resource()

    assert created.id != muon["id"]
    assert sorted(active(rig, "model_resources")) == sorted([muon["id"], created.id])


def test_an_object_that_existed_before_the_interrupted_create_is_never_taken(rig):
    strangers = made_elsewhere(rig)  # another stack's identical resource, older
    left_entry(rig, REQUEST)  # its snapshot holds the stranger's

    created = rig.create_resource()

    assert created.id != strangers.id
    assert len(rig.posts(RESOURCES)) == 2  # the stranger's and ours


def test_an_id_another_entry_holds_is_never_taken_by_a_match(rig):
    """A concurrent create of another stack made it and recorded its id: it is theirs, not a match of ours."""
    left_entry(rig, REQUEST)
    theirs = post_by_hand(rig, RESOURCES, REQUEST.to_wire())
    left_entry(rig, REQUEST, owner="organization/test/prod/gpu", ident=theirs["id"])

    created = rig.create_resource()

    assert created.id != theirs["id"]


def test_a_match_that_a_rival_unanswered_create_may_have_made_is_not_taken(rig):
    """Another stack's create of the same request, also unanswered, ran at the same time: the one look-alike
    could be either's."""
    left_entry(rig, REQUEST)
    left_entry(rig, REQUEST, owner="organization/test/prod/gpu")
    one = post_by_hand(rig, RESOURCES, REQUEST.to_wire())
    rig.control.clear_requests()

    with pytest.raises(UserError, match="another create of the same request"):
        rig.create_resource()
    assert rig.posts(RESOURCES) == []
    assert active(rig, "model_resources") == [one["id"]]


def test_an_entry_killed_before_its_post_made_nothing_and_is_dropped(rig):
    left_entry(rig, REQUEST, sent=False)
    rig.create_resource()
    assert unfinished() == []


# ------------------------------------------------------------------------------------- failure paths


def test_a_failed_create_whose_stop_failed_keeps_its_entry_and_the_next_create_takes_it_over(rig):
    rig.control.configure(timings={"resource_pending": 60.0})
    rig.control.add_fault(method="POST", path=r"/stop$", status=400, times=None)

    with pytest.raises(UserError, match="Stopping it failed too"):
        rig.create_resource(create_timeout=1)

    [kept] = [s.entry for s in unfinished()]
    assert kept.id == active(rig, "model_resources")[0] and kept.state == State.CREATED
    rig.control.clear_faults()
    rig.control.configure(timings={"resource_pending": 0.0})
    rig.control.clear_requests()
    assert rig.create_resource().id == kept.id
    assert rig.posts(RESOURCES) == []


def test_when_the_interrupted_object_cannot_be_looked_up_nothing_is_created_and_the_entry_stays(rig):
    made = made_elsewhere(rig)
    left_entry(rig, REQUEST, ident=made.id)
    rig.control.add_fault(method="GET", path=f"^{RESOURCES}/{made.id}$", status=503, times=None)
    rig.control.clear_requests()

    with pytest.raises(UserError) as caught:
        rig.create_resource()

    assert made.id in str(caught.value) and "looking for it failed" in str(caught.value)
    assert rig.posts(RESOURCES) == []  # never a second allocation on a guess
    assert [e.entry.id for e in unfinished()] == [made.id]
    rig.control.clear_faults()
    assert rig.create_resource().id == made.id  # the next run takes it over


def test_an_unwritable_journal_folder_fails_before_the_post_naming_the_folder(rig, tmp_path, monkeypatch):
    folder = tmp_path / "readonly"
    folder.mkdir()
    folder.chmod(0o500)
    monkeypatch.setenv("TOGETHER_RL_STATE_DIR", str(folder))
    if os.access(folder, os.W_OK):  # root ignores permission bits: make the folder a file instead
        folder.chmod(0o700)
        folder.rmdir()
        folder.write_text("not a folder")
    rig.control.clear_requests()

    with pytest.raises(UserError) as caught:
        rig.create_resource()

    message = str(caught.value)
    assert str(folder) in message and "TOGETHER_RL_STATE_DIR" in message and "nothing was created" in message
    assert rig.posts(RESOURCES) == []


def test_malformed_entries_are_skipped_with_one_warning_naming_the_file(rig, capsys):
    folder = journal.directory()
    folder.mkdir(parents=True, exist_ok=True)
    numeric = folder / "numeric.json"
    numeric.write_text(json.dumps({"version": 2, "kind": "model resource", "base_url": "x", "body": {},
                                   "state": "posting", "started_at": 1700000000}))  # fmt: skip
    garbage = folder / "garbage.json"
    garbage.write_text("{not json")

    rig.create_resource()
    rig.create_resource(owner=OWNER + "gpu-2")

    err = capsys.readouterr().err
    for path in (numeric, garbage):
        assert err.count(f"skipped the create journal entry {path}") == 1


def err_names(capsys, path) -> bool:
    return f"skipped the create journal entry {path}" in capsys.readouterr().err


def test_an_entry_left_after_the_engine_was_gone_tells_how_to_clear_what_the_engine_left(rig, capsys):
    made = made_elsewhere(rig)
    left_entry(rig, REQUEST, ident=made.id, note=GONE_NOTE)

    assert rig.create_resource().id == made.id
    err = capsys.readouterr().err
    assert "pulumi cancel" in err and "pulumi refresh --clear-pending-creates" in err
    recover = f"`{command('recover --stack organization/test/dev')}` clears"
    assert err.count(recover) == 2  # the take-over's line, and the note on the killed engine, with the id
    assert f"the run that made {made.id} was killed" in err


def test_entries_are_taken_over_once_across_processes(rig):
    """Four processes race to take one entry over: exactly one wins (and the entry stays in the journal)."""
    entry = left_entry(rig, REQUEST, ident="mr_x")
    code = (
        "import sys, time\n"
        "from pulumi_together_rl.ownership import journal, leases\n"
        "seen = journal.current().read(sys.argv[2], warn=None)\n"
        "time.sleep(max(0, float(sys.argv[1]) - time.time()))\n"
        "print(leases.Holding.take(seen) is not None, flush=True)\n"
        "time.sleep(2)\n"
    )
    start = str(time.time() + 1.5)
    racers = [
        subprocess.Popen([sys.executable, "-c", code, start, entry.key], stdout=subprocess.PIPE, text=True)
        for _ in range(4)
    ]
    answers = [r.communicate(timeout=30)[0].strip() for r in racers]
    assert sorted(answers) == ["False", "False", "False", "True"]
    assert [e.key for e in unfinished()] == [entry.key]


def test_adopting_one_of_the_look_alikes_settles_the_entry_so_a_later_create_never_takes_the_other(rig):
    """The ambiguity's advice followed: the user adopts theirs. Once it is destroyed, the colleague's look-alike
    (still inside the old window) must not become a unique match for the next create of this declaration."""
    left_entry(rig, REQUEST)
    ours = post_by_hand(rig, RESOURCES, REQUEST.to_wire())
    colleagues = post_by_hand(rig, RESOURCES, REQUEST.to_wire())
    with pytest.raises(UserError, match="none can be proven"):
        rig.create_resource()

    adopted = rig.create_resource(adopt_id=ours["id"])
    assert adopted.id == ours["id"]
    assert unfinished() == []
    rig.resources.delete(ours["id"], {"created_at": "2020-01-01T00:00:00Z"})

    again = rig.create_resource()
    assert again.id not in (ours["id"], colleagues["id"])
    assert colleagues["id"] in active(rig, "model_resources")  # never touched


def test_a_done_record_is_never_taken_over_even_by_the_same_declaration_name(rig):
    """Its create answered its engine: a state holds that object (maybe another backend's stack with the same
    organization, project and stack name). It only stays a claim."""
    first = rig.create_resource()
    rig.control.clear_requests()

    second = rig.create_resource()  # the same declaration name again, as another backend's stack would

    assert second.id != first.id and len(rig.posts(RESOURCES)) == 1
    assert sorted(active(rig, "model_resources")) == sorted([first.id, second.id])


def test_dismissing_an_ambiguous_entry_keeps_it_a_rival_so_another_stack_never_takes_the_look_alike(rig):
    """Two stacks' identical creates both got no answer; each run refuses (each contests the other). The user
    of one dismisses its entry as the error says: its next run creates a new one, and the other stack's
    take-over still cannot take the object the dismissed create may have made."""
    mine = left_entry(rig, REQUEST)
    left_entry(rig, REQUEST, owner="organization/test/prod/gpu")
    made = post_by_hand(rig, RESOURCES, REQUEST.to_wire())
    with pytest.raises(UserError, match="journal dismiss") as caught:
        rig.create_resource()
    assert mine.name in str(caught.value)

    dismissed = subprocess.run(
        [sys.executable, "-m", "pulumi_together_rl", "journal", "dismiss", mine.name],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert dismissed.returncode == 0, dismissed.stderr
    fresh = rig.create_resource()  # a new one: the dismissed entry is never taken over
    assert fresh.id != made["id"]

    with pytest.raises(UserError, match="another create of the same request"):
        rig.create_resource(owner="organization/test/prod/gpu")  # still contested by the dismissed entry
    assert made["id"] in active(rig, "model_resources")


def test_a_lost_answer_among_look_alikes_names_them_all_and_the_entry_to_dismiss_at_once(rig):
    """The create's own POST acts, then answers 500, while two colleagues' identical POSTs land in its window,
    and the list lags creates: at the answer, the look-alikes are listed and the create's own object is not yet.
    The lookup cannot tell them apart, so the error names all three, once the list has had time to show the
    create's own, and already says how to decide (adopt_id, or dismiss this create's entry), since another run
    would find the same three. Dismissing it lets the next run create a new one; nothing is stopped."""
    rig.control.configure(list_lag=LIST_LAG_HERE / 2)
    fault = rig.control.add_fault(method="POST", path=f"^{RESOURCES}$", status=500, act_then_fail=True,
                                  latency=3.0, times=1)  # fmt: skip
    failure = rig.create_resource_failing()
    deadline = time.monotonic() + 30
    while not any(f["id"] == fault and f["fired"] for f in rig.control.faults()):
        assert time.monotonic() < deadline, "the create's POST never reached the emulator"
        time.sleep(0.02)
    colleagues = {
        post_by_hand(rig, RESOURCES, REQUEST.to_wire())["id"] for _ in range(2)
    }  # while it is in flight
    error = failure(180)

    assert isinstance(error, UserError), error
    message = str(error)
    [entry] = unfinished()
    [ours] = [i for i in active(rig, "model_resources") if i not in colleagues]
    assert all(i in message for i in (ours, *colleagues)) and "none can be proven" in message
    assert "adopt_id" in message and f"journal dismiss {entry.name}" in message
    assert "Run `pulumi up` again" not in message  # another run would only find the same three

    rig.control.clear_faults()
    dismissed = subprocess.run(
        [sys.executable, "-m", "pulumi_together_rl", "journal", "dismiss", entry.name],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert dismissed.returncode == 0, dismissed.stderr
    fresh = rig.create_resource()
    assert fresh.id != ours and fresh.id not in colleagues
    assert sorted(active(rig, "model_resources")) == sorted([ours, *colleagues, fresh.id])  # none stopped


def test_the_journal_command_lists_unfinished_entries_and_refuses_to_dismiss_one_in_flight(rig):
    entry = left_entry(rig, REQUEST, ident="mr_listed")
    listed = subprocess.run(
        [sys.executable, "-m", "pulumi_together_rl", "journal"], capture_output=True, text=True, timeout=60
    )
    assert entry.name in listed.stdout and "mr_listed" in listed.stdout and GPU in listed.stdout
    holder = hold(entry)
    try:
        refused = subprocess.run(
            [sys.executable, "-m", "pulumi_together_rl", "journal", "dismiss", entry.name[:8]],
            capture_output=True,
            text=True,
            timeout=60,
        )
    finally:
        holder.kill()
        holder.wait()
    assert refused.returncode == 1 and "a running `pulumi up` holds it" in refused.stderr
    assert [e.entry.state for e in unfinished()] == [State.CREATED]


# ----------------------------------------------------------------------------------------------- claims


def test_an_id_whose_claim_was_never_written_is_taken_over_and_claimed(rig):
    """Killed between the id's write and its claim's: the next run takes the object over by id and writes the
    claim, naming the entry it took over (another declaration's match can never take it after that)."""
    made = made_elsewhere(rig)
    entry = left_entry(rig, REQUEST, ident=made.id, claimed=False)
    assert journal.current().claim(rig.emulator.base_url, made.id) is None

    assert rig.create_resource().id == made.id

    found = journal.current().claim(rig.emulator.base_url, made.id)
    assert found is not None and found[0] is not None and found[0].entry == entry.key


def test_a_claim_naming_an_entry_that_is_gone_makes_its_object_ambiguous_never_excluded(rig):
    """The one look-alike inside an interrupted POST's window is claimed by an entry that does not exist (a planted
    claim, or the wreck of an older release): the claim proves nothing, neither that the object is another's (a
    new POST would then bill a second GPU) nor that it is this create's. Nothing is taken, nothing is POSTed."""
    entry = left_entry(rig, REQUEST)
    made = post_by_hand(rig, RESOURCES, REQUEST.to_wire())
    store = journal.current().store
    store.create(
        journal.Journal.claim_key(rig.emulator.base_url, made["id"]), b'{"entry": "entries/none/gone.json"}'
    )
    rig.control.clear_requests()

    with pytest.raises(UserError, match="none can be proven") as caught:
        rig.create_resource()

    assert made["id"] in str(caught.value) and f"journal dismiss {entry.name}" in str(caught.value)
    assert rig.posts(RESOURCES) == [] and active(rig, "model_resources") == [made["id"]]


def test_a_claim_naming_the_interrupted_entry_itself_is_its_proof(rig):
    """An entry of the old order (its claim written, then killed before its id was): the claim names that entry,
    so the object is its own, taken over whatever else looks alike, and no second one is made."""
    entry = left_entry(rig, REQUEST)
    made = post_by_hand(rig, RESOURCES, REQUEST.to_wire())
    post_by_hand(rig, RESOURCES, REQUEST.to_wire())  # a colleague's look-alike inside the same window
    store = journal.current().store
    claim = json.dumps({"entry": entry.key, "owner": GPU, "kind": "model resource"}).encode()
    store.create(journal.Journal.claim_key(rig.emulator.base_url, made["id"]), claim)
    rig.control.clear_requests()

    assert rig.create_resource().id == made["id"]
    assert rig.posts(RESOURCES) == []
