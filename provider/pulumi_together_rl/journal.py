"""The create journal: what an interrupted ``pulumi up`` made is taken over by the next one, never made twice.

A create is a transaction the engine only records when the provider answers. Anything that kills the answer on
the way (Ctrl-C twice, SIGTERM of a CI job, SIGKILL of the plugin, a machine going down) would leave an object
billing that no state knows about, and the next ``pulumi up`` would make a second one. So every create writes
an entry, one small JSON file per create, in a per-user folder:

1. before the POST: the intent (kind, API base URL, the request body, the time, this process's pid);
2. after the POST answered: the object's id;
3. when the create returns to the engine (READY / RUNNING, or failed and stopped): the entry is removed.

The next create with the *same* request to the same API looks for entries left by a process that is no longer
running. An entry with an id whose object is still active is taken over: the create waits for that object
instead of POSTing, and says so. An entry without an id (killed between the POST and its answer, or a create
whose answer was lost and whose object was not found) is matched against the active objects made since its
time. Entries whose objects are gone are dropped. Entries of a live process are never touched (another stack
may be creating the same thing right now).

What it cannot do: it lives on one machine, so a CI runner that is thrown away loses it; and an entry is only
read by a create of the same request, so an interrupted object that is no longer declared is not taken over.
Both are left to the orphan finder (``python -m pulumi_together_rl orphans``), which labels the objects that
entries name. The folder is ``$TOGETHER_RL_STATE_DIR/journal``, by default
``${XDG_STATE_HOME:-~/.local/state}/pulumi-together-rl/journal``. No secret is written: the body of a create
holds no key.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import os
import tempfile
import threading
import uuid
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

_lock = threading.Lock()


def directory() -> Path:
    """Where entries live (created on first write)."""
    root = os.environ.get("TOGETHER_RL_STATE_DIR")
    if not root:
        base = os.environ.get("XDG_STATE_HOME") or os.path.join(os.path.expanduser("~"), ".local", "state")
        root = os.path.join(base, "pulumi-together-rl")
    return Path(root) / "journal"


def fingerprint(kind: str, base_url: str, body: dict[str, Any]) -> str:
    text = json.dumps({"kind": kind, "base_url": base_url.rstrip("/"), "body": body}, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()


@dataclasses.dataclass
class Entry:
    """One create in flight (or interrupted)."""

    path: Path
    kind: str
    base_url: str
    body: dict[str, Any]
    key: str
    started_at: str
    pid: int
    id: str | None = None

    @property
    def started(self) -> datetime:
        return datetime.fromisoformat(self.started_at)

    def record(self, ident: str) -> None:
        """The POST answered: the object exists under ``ident``."""
        self.id = ident
        self._write()

    def remove(self) -> None:
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()

    def _write(self) -> None:
        data = {k: v for k, v in dataclasses.asdict(self).items() if k != "path"}
        self.path.parent.mkdir(parents=True, exist_ok=True)
        # Atomic: a reader (or a crash) never sees half an entry.
        fd, tmp = tempfile.mkstemp(dir=self.path.parent, prefix=".entry-", suffix=".tmp")
        with os.fdopen(fd, "w") as out:
            json.dump(data, out)
            out.flush()
            os.fsync(out.fileno())
        os.replace(tmp, self.path)

    @classmethod
    def load(cls, path: Path) -> Entry | None:
        try:
            data = json.loads(path.read_text())
            return cls(
                path=path, **{f.name: data[f.name] for f in dataclasses.fields(cls) if f.name != "path"}
            )
        except (OSError, ValueError, KeyError, TypeError):
            return None


def begin(kind: str, base_url: str, body: dict[str, Any]) -> Entry:
    """Write the intent of a create, before its POST."""
    entry = Entry(
        path=directory() / f"{uuid.uuid4().hex}.json",
        kind=kind,
        base_url=base_url.rstrip("/"),
        body=body,
        key=fingerprint(kind, base_url, body),
        started_at=datetime.now(timezone.utc).isoformat(),
        pid=os.getpid(),
    )
    entry._write()
    return entry


def entries() -> list[Entry]:
    """Every readable entry, oldest first."""
    folder = directory()
    if not folder.is_dir():
        return []
    found = [e for e in (Entry.load(p) for p in folder.glob("*.json")) if e is not None]
    return sorted(found, key=lambda e: e.started_at)


def interrupted(kind: str, base_url: str, body: dict[str, Any]) -> list[Entry]:
    """Entries of the same create left by processes that are no longer running, oldest first."""
    key = fingerprint(kind, base_url, body)
    return [e for e in entries() if e.key == key and not alive(e.pid)]


def take(entry: Entry) -> bool:
    """Take ``entry`` for this process, once (an atomic rename): False when another thread or process got it
    first. A taken entry is no longer listed; :func:`give_back` it, or remove it once its object is recorded
    elsewhere."""
    with _lock:
        target = entry.path.with_name(f"{entry.path.stem}.taken-{os.getpid()}-{threading.get_ident()}")
        try:
            os.replace(entry.path, target)
        except FileNotFoundError:
            return False
    entry.path = target
    return True


def give_back(entry: Entry) -> None:
    """Undo :func:`take`: the entry is listed again for a later create."""
    original = entry.path.with_name(entry.path.name.split(".taken-", 1)[0] + ".json")
    os.replace(entry.path, original)
    entry.path = original


def alive(pid: int) -> bool:
    """Whether the process that wrote an entry still runs (its entries are a create in flight)."""
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
