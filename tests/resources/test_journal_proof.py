"""What an entry proves, and what it does not: the by-id take-over holds the object against the declaration, a
namesake stack in another backend never takes what this one's interrupted create made, an entry that recorded no
backend is named instead of taken, and an id the journal could not record after the POST is never called
"nothing was created". Against the emulator over loopback, with real files (a full tmpfs for the full disk)."""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time

import pytest
from harness.cli import wait_until
from harness.journals import entries, rewrite

from pulumi_together_rl.client.models import ModelResourceCreateRequest
from pulumi_together_rl.messages import UserError
from pulumi_together_rl.ownership.records import POST_BOUND

from .conftest import OWNER
from .test_create_journal import REQUEST, RESOURCES, active, left_entry, made_elsewhere


def stops(rig) -> list[str]:
    return [r["path"] for r in rig.control.requests() if r["path"].endswith("/stop")]


def test_an_entry_naming_an_object_that_is_not_what_is_declared_is_refused_naming_both(rig):
    """A planted entry (our declaration and request, a colleague's id): the colleague's smaller GPU is not taken."""
    theirs = made_elsewhere(rig, request=ModelResourceCreateRequest(base_model="Qwen/Qwen3-0.6B"))
    entry = left_entry(rig, REQUEST, ident=theirs.id)
    rig.control.clear_requests()

    with pytest.raises(UserError) as refused:
        rig.create_resource()

    sentence = str(refused.value)
    assert sentence.startswith(
        f"creating model resource ({theirs.id}): the create journal entry {entry.where}"
    )
    assert "base_model (declared 'Qwen/Qwen3.5-4B', actual 'Qwen/Qwen3-0.6B')" in sentence
    assert f"journal prune {entry.name}" in sentence
    assert rig.posts(RESOURCES) == [] and stops(rig) == []  # nothing made, nothing stopped
    assert active(rig, "model_resources") == [theirs.id]


def test_a_namesake_stack_in_another_backend_never_takes_what_this_ones_create_made(rig, monkeypatch):
    """Two stacks of the same organization, project, stack and resource names, in two file backends of one
    machine: the first's create was interrupted with its id; the second's create makes its own."""
    monkeypatch.setenv("PULUMI_BACKEND_URL", "file:///srv/team-state")
    made = made_elsewhere(rig)
    left_entry(rig, REQUEST, ident=made.id)

    monkeypatch.setenv("PULUMI_BACKEND_URL", "file:///home/dev/.pulumi-local")
    rig.control.clear_requests()
    namesake = rig.create_resource()
    assert namesake.id != made.id and len(rig.posts(RESOURCES)) == 1
    assert set(active(rig, "model_resources")) == {made.id, namesake.id}

    monkeypatch.setenv("PULUMI_BACKEND_URL", "file:///srv/team-state")
    rig.control.clear_requests()
    again = rig.create_resource()
    assert again.id == made.id and rig.posts(RESOURCES) == []  # its own backend's run takes it over


def test_an_entry_of_the_release_before_which_recorded_no_backend_is_named_never_taken(rig):
    made = made_elsewhere(rig)
    entry = rewrite(left_entry(rig, REQUEST, ident=made.id), version=2, backend=None, backend_location=None)
    rig.control.clear_requests()

    with pytest.raises(UserError) as named:
        rig.create_resource()

    sentence = str(named.value)
    assert (
        f"run by an earlier release that did not record the stack's backend, made {made.id} (READY)"
        in sentence
    )
    assert f"set adopt_id to {made.id}" in sentence and f"journal dismiss {entry.name}" in sentence
    assert rig.posts(RESOURCES) == [] and stops(rig) == []


@pytest.fixture
def small_disk(tmp_path, monkeypatch):
    """The journal on a 1 MiB tmpfs of its own, and a way to fill it."""
    mount = tmp_path / "disk"
    mount.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m,mode=0700", "tmpfs", str(mount)], check=True)
    monkeypatch.setenv("TOGETHER_RL_STATE_DIR", str(mount))

    def fill() -> None:
        fd = os.open(mount / "filler", os.O_WRONLY | os.O_CREAT, 0o600)
        try:
            for size in (65536, 4096, 1):
                while True:
                    try:
                        os.write(fd, b"\0" * size)
                    except OSError:
                        break
        finally:
            os.close(fd)

    try:
        yield fill
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def test_a_disk_that_fills_after_the_post_never_says_nothing_was_created(rig, small_disk, capsys):
    """The POST is slow; the disk fills while it is in flight; the answer cannot be recorded. The create goes
    on: the id reaches the engine with the answer, and a line says what the journal could not do."""
    rig.control.add_fault(method="POST", path=f"^{RESOURCES}$", status=None, latency=1.5, times=1)

    def fill_once_sent() -> None:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            if any(e.entry.sends for e in entries()):
                small_disk()
                return
            time.sleep(0.02)

    filler = threading.Thread(target=fill_once_sent)
    filler.start()
    created = rig.create_resource()
    filler.join()

    err = capsys.readouterr().err
    assert "nothing was created" not in err
    assert (
        f"warning: model resource {created.id}: created, but the create journal could not record its id"
        in err
    )
    assert "No space left on device" in err
    assert active(rig, "model_resources") == [created.id] and stops(rig) == []  # READY, kept, in the answer


def test_a_full_disk_before_the_post_sends_nothing(rig, small_disk):
    small_disk()
    rig.control.clear_requests()
    with pytest.raises(UserError) as refused:
        rig.create_resource()
    assert "(No space left on device)" in str(refused.value)
    assert str(refused.value).rstrip(".").endswith("nothing was created")
    assert rig.posts(RESOURCES) == []


def _when_posting(action) -> threading.Thread:
    """Run ``action`` once this process's create has sent its POST (its journal entry has a send)."""

    def run() -> None:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            if any(e.entry.sends and not e.entry.id for e in entries()):
                action()
                return
            time.sleep(0.01)

    thread = threading.Thread(target=run)
    thread.start()
    return thread


def test_a_post_the_api_answered_as_failed_never_takes_a_colleagues_look_alike(rig):
    """The API answers this create's POST with its own 503 (nothing made) while a colleague's identical POST
    lands: the colleague's is named, never taken, nothing is resent; and the next run does not take it either."""
    rig.control.add_fault(method="POST", path=f"^{RESOURCES}$", status=503, latency=1.0, times=1)
    colleagues: dict = {}
    thread = _when_posting(lambda: colleagues.update(vars(made_elsewhere(rig))))

    with pytest.raises(UserError) as named:
        rig.create_resource()
    thread.join()

    sentence = str(named.value)
    assert colleagues["id"] in sentence and "the API itself answered that the create failed" in sentence
    assert "adopt_id" in sentence and "journal dismiss" in sentence
    assert len(rig.posts(RESOURCES)) == 2  # ours (answered 503) and the colleague's: nothing resent
    rig.control.clear_requests()

    with pytest.raises(UserError) as again:  # the next `pulumi up` of the declaration
        rig.create_resource()
    assert colleagues["id"] in str(again.value) and rig.posts(RESOURCES) == []
    assert stops(rig) == [] and active(rig, "model_resources") == [colleagues["id"]]


def test_a_look_alike_made_after_an_interrupted_posts_own_window_is_never_taken(rig):
    """A create killed during its POST (no answer): what it may have made was made within the POST's read
    timeout, on the API's clock as measured then. A colleague's identical object 90 s after that is not it."""
    rig.client.list_model_resources()  # the API's clock, measured
    # Killed mid-POST: no answer, nothing it made.
    left_entry(rig, REQUEST, OWNER + "gpu", clock_offset=rig.client.clock_offset)
    assert POST_BOUND + 3 < 90  # the bound this test pins: a read timeout, not minutes
    rig.control.advance(90)
    theirs = made_elsewhere(rig)
    rig.control.clear_requests()

    created = rig.create_resource()

    assert created.id != theirs.id and len(rig.posts(RESOURCES)) == 1
    assert set(active(rig, "model_resources")) == {theirs.id, created.id} and stops(rig) == []


def test_an_entry_naming_an_object_with_another_server_default_is_refused(rig):
    """A planted entry (our declaration and request, which leaves inactive_timeout to the server's default of an
    hour) names a colleague's GPU of the same model made with a 10-minute timeout: held to the declaration with the
    server's defaults filled in, as a match is, it is not what this declaration makes, and is not taken."""
    theirs = made_elsewhere(
        rig, request=ModelResourceCreateRequest(base_model=REQUEST.base_model, inactive_timeout=600)
    )
    left_entry(rig, REQUEST, ident=theirs.id)
    rig.control.clear_requests()

    with pytest.raises(UserError) as refused:
        rig.create_resource()

    assert "inactive_timeout (declared None, actual 600)" in str(refused.value)
    assert rig.posts(RESOURCES) == [] and stops(rig) == []
    assert active(rig, "model_resources") == [theirs.id]


def test_the_apis_clock_offset_is_kept_so_a_skewed_api_still_finds_a_lost_answers_object(rig):
    """The API's clock runs five minutes ahead of this machine's. A create (a provider process of its own) is
    SIGKILLed while its POST is in flight; the POST lands anyway, its object stamped on the API's clock, minutes
    outside the POST's window as this machine's clock says it and inside it once the offset the create measured and
    recorded is applied: the next run takes it over, and no second GPU is made."""
    from .test_shared_journal import Creator

    rig.control.advance(300)
    rig.control.add_fault(method="POST", path=f"^{RESOURCES}$", status=None, latency=3.0, times=1)
    creator = Creator(rig)
    try:
        [posting] = wait_until(lambda: [s for s in entries() if s.entry.sends], 30, "the create's POST")
        creator.signal(signal.SIGKILL)
    finally:
        creator.kill()
    assert posting.entry.clock_offset is not None and posting.entry.clock_offset > 250
    [made] = wait_until(lambda: active(rig, "model_resources"), 60, "the POST to land")
    rig.control.clear_requests()

    created = rig.create_resource()

    assert created.id == made and rig.posts(RESOURCES) == []
    assert active(rig, "model_resources") == [made]
