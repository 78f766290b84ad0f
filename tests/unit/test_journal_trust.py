"""A journal that trusts nothing it did not write: its folder is this user's alone, and an entry or lock that
is not (a planted file, a symbolic link, a FIFO, a file too large or too deep) is refused, never acted on. And the
operator's commands on it: ``journal prune`` drops what the user names, ``dismiss`` and ``prune`` give the right
reason when the folder cannot be written. Real files, modes and owners (the suite runs as root: ``chown`` to
``nobody`` is another user)."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys

import pytest

from pulumi_together_rl.__main__ import main
from pulumi_together_rl.ownership import journal

BASE = "https://api.test"
BODY = {"base_model": "Qwen/Qwen3.5-4B"}
NOBODY = 65534


def folder() -> journal.Path:
    return journal.directory()


def left(owner: str = "o/p/s/gpu", ident: str | None = "mr-1") -> journal.Entry:
    entry = journal.begin("model resource", BASE, BODY, owner)
    entry.posting([])
    entry.sending()
    if ident:
        entry.record(ident)
    entry.release()
    return entry


def test_the_folder_is_created_for_this_user_alone():
    left()
    seen = os.stat(folder())
    assert stat.S_IMODE(seen.st_mode) == 0o700 and seen.st_uid == os.geteuid()


@pytest.mark.parametrize(
    ("change", "why"),
    [
        (lambda path: os.chmod(path, 0o777), "can be written by others (mode 0777)"),
        (lambda path: os.chmod(path, 0o770), "can be written by others (mode 0770)"),
        (lambda path: os.chown(path, NOBODY, -1), f"belongs to another user (uid {NOBODY})"),
    ],
)
def test_a_folder_others_can_write_refuses_every_create_in_one_sentence_naming_it(change, why):
    left()
    change(folder())
    with pytest.raises(journal.Untrusted) as refused:
        journal.begin("model resource", BASE, BODY, "o/p/s/gpu")
    sentence = str(refused.value)
    assert f"the create journal folder {folder()} {why}, so its entries cannot be trusted" in sentence
    assert f"chmod 700 {folder()}" in sentence and sentence.count(". ") == 1
    with pytest.raises(journal.Untrusted):
        journal.entries()  # and nothing in it is read


def _planted(name: str, data: dict, *, owner: int | None = None, mode: int = 0o600) -> journal.Path:
    path = folder() / f"{name}.json"
    path.write_text(json.dumps(data))
    os.chmod(path, mode)
    if owner is not None:
        os.chown(path, owner, -1)
    return path


def test_entries_not_this_users_alone_are_skipped_with_a_warning_naming_them(capsys):
    mine = left()
    data = json.loads(mine.path.read_text())
    foreign = _planted("foreign", {**data, "id": "mr-colleague"}, owner=NOBODY)
    writable = _planted("writable", {**data, "id": "mr-other"}, mode=0o666)
    link = folder() / "link.json"
    link.symlink_to(mine.path)
    fifo = folder() / "fifo.json"
    os.mkfifo(fifo)

    seen = journal.entries()

    assert [e.path for e in seen] == [mine.path]  # the FIFO did not block the read either
    err = capsys.readouterr().err
    assert f"skipped the create journal entry {foreign}: it cannot be read (it belongs to another user" in err
    assert f"{writable}: it cannot be read (it can be written by others (mode 0666))" in err
    assert f"{link}: it cannot be read (it is a symbolic link)" in err
    assert f"{fifo}: it cannot be read (it is not a regular file)" in err
    assert journal.claimed_ids() == {"mr-1"}  # a planted claim protects nothing and takes nothing


def test_huge_and_deep_entries_are_refused_without_failing_a_create(capsys):
    data = json.loads(left().path.read_text())
    huge = _planted("huge", {**data, "note": "x" * (journal.MAX_ENTRY_BYTES + 10)})
    deep = folder() / "deep.json"
    deep.write_text("[" * 200_000 + "]" * 200_000)
    os.chmod(deep, 0o600)
    nested = _planted("nested", {**data, "body": {"a": json.loads("[" * 40 + "]" * 40)}})

    entry = journal.begin("model resource", BASE, BODY, "o/p/s/gpu")
    assert journal.left_by_interrupted(entry) != []  # what a create reads: the readable entry, no failure
    entry.discard()

    err = capsys.readouterr().err
    assert f"{huge}: it cannot be read (it is {huge.stat().st_size} bytes, more than" in err
    assert f"{deep}: it cannot be read (it is nested deeper than any entry this provider writes" in err
    assert f"{nested}: it cannot be read (it is nested deeper than any entry this provider writes (32" in err


def test_a_planted_symlink_lock_is_never_followed(tmp_path):
    entry = left()
    os.unlink(entry.lock_path)
    target = tmp_path / "elsewhere" / "made-by-the-victim"
    target.parent.mkdir()
    entry.lock_path.symlink_to(target)

    fresh = journal.load(entry.path)
    assert isinstance(fresh, journal.Entry)
    assert fresh.claim() is False  # not a lock of ours: the entry is not acted on
    assert fresh.in_flight() is True  # ... and counts as held, so nobody takes it
    assert not target.exists()


def test_prune_drops_what_the_user_names_and_nothing_else(capsys):
    done = left("o/p/s/a")
    done.claim()
    done.done()
    stale = left("o/p/s/b", ident=None)
    held = left("o/p/s/c")
    holder = _hold(held)
    try:
        assert main(["journal", "list", "--all"]) == 0
        listing = capsys.readouterr().out
        assert done.path.stem in listing and stale.path.stem in listing and "3 entries in" in listing

        assert main(["journal", "prune", done.path.stem[:12], stale.path.stem]) == 0
        out = capsys.readouterr().out
        assert f"dropped {done.path.stem} (done, model resource of o/p/s/a); nothing records that mr-1" in out
        assert f"dropped {stale.path.stem} (posting, model resource of o/p/s/b)" in out

        assert main(["journal", "prune", held.path.stem]) == 1
        assert "a running `pulumi up` holds it" in capsys.readouterr().err
        assert [e.path for e in journal.entries()] == [held.path]
    finally:
        holder.kill()
        holder.wait()


def _hold(entry: journal.Entry) -> subprocess.Popen:
    code = (
        "import fcntl, os, time\n"
        f"fd = os.open({str(entry.lock_path)!r}, os.O_RDWR)\n"
        "fcntl.flock(fd, fcntl.LOCK_EX)\n"
        "print('held', flush=True)\n"
        "time.sleep(600)\n"
    )
    holder = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    assert holder.stdout.readline().strip() == "held"
    return holder


@pytest.fixture
def read_only_journal(tmp_path, monkeypatch):
    """The journal on a read-only mount (a tmpfs mounted read-only once an entry is in it)."""
    mount = tmp_path / "ro"
    mount.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(mount)], check=True)
    try:
        monkeypatch.setenv("TOGETHER_RL_STATE_DIR", str(mount))
        entry = left(ident=None)
        subprocess.run(["mount", "-o", "remount,ro", str(mount)], check=True)
        yield entry
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


@pytest.mark.parametrize("action", ["dismiss", "prune"])
def test_a_read_only_journal_is_named_not_blamed_on_a_running_pulumi_up(read_only_journal, action, capsys):
    assert main(["journal", action, read_only_journal.path.stem]) == 1
    err = capsys.readouterr().err
    assert "a running `pulumi up` holds it" not in err
    assert (
        f"the create journal folder {read_only_journal.path.parent} cannot be written (Read-only file system)"
        in err
    )


def test_the_journal_list_of_an_untrusted_folder_is_one_sentence(capsys):
    left()
    os.chmod(folder(), 0o777)
    assert main(["journal"]) == 1
    err = capsys.readouterr().err
    assert (
        err.startswith("error: reading the create journal: the create journal folder")
        and "Traceback" not in err
    )
