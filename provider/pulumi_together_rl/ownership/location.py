"""Where the create journal lives: where the stack's state lives, without configuration.

First match wins:

1. ``TOGETHER_RL_JOURNAL_URL`` (a ``file://`` folder or a bucket URL, gocloud.dev's grammar as Pulumi's
   self-managed backends take it: ``s3://bucket/prefix?endpoint=...&region=...``, ``gs://``, ``azblob://``);
2. the provider's ``journalUrl`` setting (``together:journalUrl`` on the dynamic face, ``together-rl:journalUrl``
   on the plugin face);
3. the stack's backend (:mod:`..backend`, found the way the CLI finds it) when it is a bucket: the journal is a
   sibling of the backend's ``.pulumi/`` folder, ``<backend URL>/.together-rl/journal``, reached with the same
   query (endpoint, region, path style) and the same credentials the CLI uses for the state;
4. else the local folder (:func:`.journal.directory`): a ``file://`` backend (``pulumi login --local`` is a folder
   of this machine, where the local journal already sees every create), Pulumi Cloud, or a backend it cannot
   determine. Under ``CI=true`` one line says that the journal is lost with the runner and how to point it at a
   bucket.

Where it is is said once per process, at its first use by a create (a preview does no journal I/O).
"""

from __future__ import annotations

import dataclasses
import os
import threading
from urllib.parse import urlsplit, urlunsplit

from .. import backend, config
from ..backend import Backend
from ..messages import progress_line

ENV_URL = "TOGETHER_RL_JOURNAL_URL"
SETTING = "journalUrl"
SIBLING = ".together-rl/journal"
"""The journal's folder in a bucket backend, beside the CLI's ``.pulumi/``."""


@dataclasses.dataclass(frozen=True)
class Location:
    """Where the journal is: ``url`` None for the local folder."""

    url: str | None
    source: str
    """Why there: ``TOGETHER_RL_JOURNAL_URL``, ``together:journalUrl``, ``the stack's backend (...)``, ..."""

    @property
    def shared(self) -> bool:
        return self.url is not None

    def describe(self) -> str:
        where = printable(self.url) if self.url else "the local folder"
        return f"{where} ({self.source})"


printable = backend.printable_url
"""``url`` without a user:password part (:func:`..backend.printable_url`)."""


def locate(
    stack_backend: Backend | None = None, *, setting: str | None = None, setting_source: str | None = None
) -> Location:
    """The journal's location for a create of a stack in ``stack_backend`` (default: this command's).
    ``setting``: the stack's ``journalUrl`` as read elsewhere (``recover`` reads the stack's config; named by
    ``setting_source``); by default the provider's own configuration."""
    explicit = os.environ.get(ENV_URL, "").strip()
    if explicit:
        return Location(explicit, ENV_URL)
    if setting_source is None:
        setting, setting_source = config.current().journal_url, config.CONFIG_JOURNAL_URL
    if setting:
        return Location(setting, setting_source)
    where = stack_backend or backend.locate()
    if where.scheme in backend.BUCKET_SCHEMES:
        return Location(sibling(where.url), f"beside the stack's state in {printable(where.url)}")
    why = {
        "file": "the stack's backend is a folder of this machine",
        "https": "the stack's backend is Pulumi Cloud"
        if where.location == backend.CLOUD
        else "the stack's backend is a Pulumi service",
    }.get(where.scheme, "the stack's backend is not a bucket")
    return Location(None, why)


def sibling(backend_url: str) -> str:
    """``s3://b/p?endpoint=e`` -> ``s3://b/p/.together-rl/journal?endpoint=e``."""
    parts = urlsplit(backend_url.strip())
    path = parts.path.rstrip("/") + "/" + SIBLING
    return urlunsplit(parts._replace(path=path))


_said: set[str] = set()
_said_lock = threading.Lock()


def announce(where: Location) -> None:
    """Say once per process where the journal is; under ``CI=true`` with a local journal, say what that loses."""
    key = where.url or ""
    with _said_lock:
        if key in _said:
            return
        _said.add(key)
    if where.shared:
        progress_line(f"create journal: {where.describe()}")
    elif os.environ.get("CI", "").lower() == "true":
        progress_line(
            f"warning: the create journal is in this machine's folder ({where.source}), and a CI runner that is "
            "thrown away loses it: a cancelled run's GPU can bill unrecorded. Keep the stack's state in a bucket "
            f"(the journal goes beside it), or set {ENV_URL} to a bucket URL (docs/journal.md)"
        )


def reset() -> None:
    """Forget what was said (tests)."""
    with _said_lock:
        _said.clear()
