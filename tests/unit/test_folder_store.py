"""A journal in a folder trusts nothing it did not write, wherever the folder is: this machine's journal folder
(``TOGETHER_RL_STATE_DIR``) and a ``file://`` URL (``TOGETHER_RL_JOURNAL_URL``, a shared mount) are one store
held to one set of rules. The folder and everything in it is this user's alone; nothing is followed through a
symbolic link or made through one; a file's size is checked before any of it is read. And the operator's
commands on it. Real files, modes and owners (the suite runs as root: ``chown`` to ``nobody`` is another user).
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from harness.journals import entries, hold, left

from pulumi_together_rl.__main__ import main
from pulumi_together_rl.ownership import journal, records
from pulumi_together_rl.ownership.journal import Journal
from pulumi_together_rl.ownership.records import Declaration, State

BASE = "https://api.test"
BODY = {"base_model": "Qwen/Qwen3.5-4B"}
NOBODY = 65534


@pytest.fixture(params=["local", "file"])
def place(request, tmp_path, monkeypatch) -> Path:
    """The journal's folder: this machine's (``TOGETHER_RL_STATE_DIR``) or a ``file://`` one."""
    if request.param == "local":
        return journal.directory()
    shared = tmp_path / "shared" / "journal"
    monkeypatch.setenv("TOGETHER_RL_JOURNAL_URL", f"file://{shared}")
    return shared


def mine(owner: str = "o/p/s/gpu", ident: str | None = "mr-1"):
    return left("model resource", BASE, BODY, owner, ident=ident)


def test_the_folder_and_what_is_made_in_it_are_this_users_alone(place):
    seen = mine()
    for folder in (place, place / "entries", (place / seen.key).parent):
        found = os.stat(folder)
        assert stat.S_IMODE(found.st_mode) == 0o700 and found.st_uid == os.geteuid(), folder
    assert stat.S_IMODE(os.stat(place / seen.key).st_mode) == 0o600


@pytest.mark.parametrize(
    ("change", "why"),
    [
        (lambda path: os.chmod(path, 0o777), "can be written by others (mode 0777)"),
        (lambda path: os.chmod(path, 0o770), "can be written by others (mode 0770)"),
        (lambda path: os.chown(path, NOBODY, -1), f"belongs to another user (uid {NOBODY})"),
    ],
)
@pytest.mark.parametrize("which", ["the folder", "a folder in it"])
def test_a_folder_others_can_write_refuses_every_use_in_one_sentence_naming_it(place, change, why, which):
    seen = mine()
    target = place if which == "the folder" else (place / seen.key).parent
    change(target)
    fresh = Journal(journal.current().store, journal.current().url)  # a new process's first use
    with pytest.raises(journal.Unreachable) as refused:
        fresh.probe() if which == "the folder" else fresh.entries()
    sentence = str(refused.value)
    assert f"the folder {target} {why}, so nothing in it can be trusted" in sentence
    assert f"chmod 700 {target}" in sentence and sentence.count(". ") == 1


def _planted(folder: Path, name: str, data: dict, *, owner: int | None = None, mode: int = 0o600) -> Path:
    path = folder / f"{name}.json"
    path.write_text(json.dumps(data))
    os.chmod(path, mode)
    if owner is not None:
        os.chown(path, owner, -1)
    return path


def test_entries_not_this_users_alone_are_skipped_with_a_warning_naming_them(place, capsys):
    seen = mine()
    folder = (place / seen.key).parent
    data = json.loads((place / seen.key).read_text())
    foreign = _planted(folder, "foreign", {**data, "id": "mr-colleague"}, owner=NOBODY)
    writable = _planted(folder, "writable", {**data, "id": "mr-other"}, mode=0o666)
    link = folder / "link.json"
    link.symlink_to(place / seen.key)
    fifo = folder / "fifo.json"
    os.mkfifo(fifo)

    found = journal.current().entries()

    assert [s.key for s in found] == [seen.key]  # the FIFO did not block the read either
    err = capsys.readouterr().err
    assert f"skipped the create journal entry {foreign}: it cannot be read (it belongs to another user" in err
    assert f"{writable}: it cannot be read (it can be written by others (mode 0666))" in err
    assert f"{link}: it cannot be read (it is a symbolic link)" in err
    assert f"{fifo}: it cannot be read (it is not a regular file)" in err


def test_nothing_is_made_or_read_through_a_symbolic_link_inside_the_folder(place, tmp_path):
    """A folder of the journal replaced by a link to somewhere else (a victim's folder): nothing is written
    there, and nothing there is read."""
    seen = mine()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir(mode=0o700)
    request_folder = (place / seen.key).parent
    for name in os.listdir(request_folder):
        os.rename(request_folder / name, elsewhere / name)
    request_folder.rmdir()
    request_folder.symlink_to(elsewhere)
    (place / "claims").rename(tmp_path / "claims-moved")
    (place / "claims").symlink_to(tmp_path / "claims-moved")
    before = sorted(os.listdir(elsewhere)), sorted(os.listdir(tmp_path / "claims-moved"))

    with pytest.raises(journal.Unreachable, match="is a symbolic link or not a folder"):
        journal.current().entries(request=seen.entry.request_key)  # what a create reads
    store = journal.current().store
    with pytest.raises(Exception, match="is a symbolic link or not a folder"):
        store.create(journal.current().claim_key(BASE, "mr-2"), b"{}")
    assert (sorted(os.listdir(elsewhere)), sorted(os.listdir(tmp_path / "claims-moved"))) == before


def test_sizes_are_checked_before_anything_is_read(place, capsys):
    """A huge entry, a deep one, and a 1.5 GB sparse file: skipped, each named; reading the journal holds no more
    than a few megabytes whatever lies in it (measured in a process of its own)."""
    seen = mine()
    folder = (place / seen.key).parent
    data = json.loads((place / seen.key).read_text())
    huge = _planted(folder, "huge", {**data, "note": "x" * (records.MAX_BYTES + 10)})
    deep = folder / "deep.json"
    deep.write_text("[" * 200_000 + "]" * 200_000)
    os.chmod(deep, 0o600)
    nested = _planted(folder, "nested", {**data, "body": {"a": json.loads("[" * 40 + "]" * 40)}})
    sparse = folder / "sparse.json"
    with open(sparse, "wb") as out:
        out.truncate(1_500_000_000)
    os.chmod(sparse, 0o600)

    found = journal.current().entries()

    assert [s.key for s in found] == [seen.key]
    err = capsys.readouterr().err
    assert f"{huge}: it cannot be read (it is {huge.stat().st_size} bytes, more than" in err
    assert f"{deep}: it cannot be read (it is nested deeper than any entry this provider writes" in err
    assert f"{nested}: it cannot be read (it is nested deeper than any entry this provider writes (32" in err
    assert f"{sparse}: it cannot be read (it is 1500000000 bytes" in err
    measure = (
        "import resource\n"
        "from pulumi_together_rl.ownership import journal\n"
        "before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss\n"
        "journal.current().entries(warn=None)\n"
        "print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before)\n"
    )
    grown = subprocess.run([sys.executable, "-c", measure], capture_output=True, text=True, check=True)
    assert int(grown.stdout) < 20_000, f"reading the journal grew the process by {grown.stdout.strip()} KiB"


def test_journal_prune_drops_what_the_user_names_and_never_an_entry_a_run_holds(place, capsys):
    done = left("model resource", BASE, BODY, "o/p/s/a2", ident="mr-2", state=State.DONE)
    stale = mine("o/p/s/b", ident=None)
    held = mine("o/p/s/c", ident="mr-3")
    holder = hold(held)  # a create on another machine: its lease is live
    try:
        assert main(["journal", "list", "--all"]) == 0
        listing = capsys.readouterr().out
        assert done.name in listing and stale.name in listing and "3 entries in" in listing

        assert main(["journal", "prune", done.name[:12], stale.name]) == 0
        out = capsys.readouterr().out
        assert f"dropped {done.name} (done, model resource of o/p/s/a2); nothing records that mr-2" in out
        assert f"dropped {stale.name} (posting, model resource of o/p/s/b)" in out
        assert journal.current().claim(BASE, "mr-2") is None  # its claim went with it ...
        assert journal.current().claim(BASE, "mr-3") is not None  # ... and only its own

        assert main(["journal", "prune", held.name]) == 1
        assert "a running `pulumi up` holds it" in capsys.readouterr().err
        assert held.key in {s.key for s in entries()}
    finally:
        holder.kill()
        holder.wait()


@pytest.fixture
def read_only_journal(tmp_path, monkeypatch):
    """The journal on a read-only mount (a tmpfs mounted read-only once an entry is in it)."""
    mount = tmp_path / "ro"
    mount.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m,mode=0700", "tmpfs", str(mount)], check=True)
    try:
        monkeypatch.setenv("TOGETHER_RL_STATE_DIR", str(mount))
        seen = mine(ident=None)
        subprocess.run(["mount", "-o", "remount,ro", str(mount)], check=True)
        yield seen
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


@pytest.mark.parametrize("action", ["dismiss", "prune"])
def test_a_read_only_journal_is_named_not_blamed_on_a_running_pulumi_up(read_only_journal, action, capsys):
    assert main(["journal", action, read_only_journal.name]) == 1
    err = capsys.readouterr().err
    assert "a running `pulumi up` holds it" not in err
    assert "(Read-only file system)" in err and "cannot be used" in err


def test_the_journal_list_of_an_untrusted_folder_is_one_sentence(place, capsys):
    mine()
    os.chmod(place, 0o777)
    journal._journals.clear()  # a new process
    assert main(["journal"]) == 1
    err = capsys.readouterr().err
    assert (
        err.startswith("error: reading the create journal: the create journal at") and "Traceback" not in err
    )
    assert f"the folder {place} can be written by others" in err


def test_a_file_url_journal_never_hands_a_create_a_planted_entrys_object(tmp_path, monkeypatch, capsys):
    """Someone else's file in a shared ``file://`` journal names a GPU of theirs as this declaration's: it is
    not read, so nothing is taken over."""
    shared = tmp_path / "team" / "journal"
    monkeypatch.setenv("TOGETHER_RL_JOURNAL_URL", f"file://{shared}")
    planted = mine(ident="mr-theirs")
    os.chown(shared / planted.key, NOBODY, -1)
    assert (
        journal.interrupted(
            journal.current(),
            Declaration.of("model resource", BASE, BODY, "o/p/s/gpu", planted.entry.backend),
        )
        == []
    )
    assert f"{shared / planted.key}: it cannot be read (it belongs to another user" in capsys.readouterr().err
