"""Object stores a shared create journal lives in: a bucket (``s3://``, ``gs://``, ``azblob://``, reached with
``obstore``) or a folder named by a ``file://`` URL, each with the two atomic writes the journal is built on.

* **create if absent** (:meth:`Store.create`): S3 ``If-None-Match: *``, GCS ``ifGenerationMatch=0``, Azure
  ``If-None-Match: *``; a folder: a hard link of a finished temporary file (``link(2)`` fails if the name
  exists). Of many writers of one key, exactly one wins.
* **compare and swap** (:meth:`Store.swap`): S3 and Azure ``If-Match: <etag>``, GCS the generation; a folder: a
  rename under an exclusive lock, after checking the content is still the version read.

"Supports the header" is not "atomic": some S3-compatible servers accept ``If-None-Match`` and let every writer
win, and some honour ``If-None-Match`` but ignore ``If-Match``. :meth:`Store.verify` refuses such a store at its
first use (a second create of one key must fail, a swap on the current version must succeed and one on a stale
version must fail), in one sentence naming what it let happen. Every version is an opaque string (an ETag, a generation, a digest of a file's bytes); every
``modified`` is the store's own clock (the server's ``Last-Modified``, the folder's ``mtime``), which is what
leases are judged by: no machine's clock is compared with another's.

``obstore`` is imported only by :mod:`.bucket`, and only when a bucket is used: a folder journal costs nothing of it.
"""

from __future__ import annotations

import contextlib
import dataclasses
import uuid
from abc import ABC, abstractmethod
from datetime import datetime, timezone

BUCKET_SCHEMES = ("s3", "gs", "azblob")


class StoreError(Exception):
    """A store could not be used: ``cause`` says why, in words for the user's sentence."""

    def __init__(self, location: str, cause: str) -> None:
        self.location = location
        self.cause = cause
        super().__init__(f"{location}: {cause}")


@dataclasses.dataclass(frozen=True)
class Stored:
    """An object as read: its bytes, its version, and when the store last wrote it (the store's clock)."""

    data: bytes
    version: str
    modified: datetime


@dataclasses.dataclass(frozen=True)
class Listed:
    """An object as listed: its key, version, size and when the store last wrote it (the store's clock)."""

    key: str
    version: str
    size: int
    modified: datetime


class Store(ABC):
    """A flat namespace of small objects with create-if-absent and compare-and-swap (see the module docstring)."""

    location: str
    """Where it is, printable: a URL without credentials."""

    @abstractmethod
    def create(self, key: str, data: bytes) -> str | None:
        """Write ``data`` at ``key`` only if nothing is there: its version, or None when something is."""

    @abstractmethod
    def read(self, key: str) -> Stored | None:
        """The object at ``key``, None when there is none."""

    @abstractmethod
    def swap(self, key: str, data: bytes, version: str) -> str | None:
        """Replace the object at ``key`` only if it is still at ``version``: the new version, or None when it
        changed or went meanwhile."""

    @abstractmethod
    def remove(self, key: str) -> None:
        """Remove the object at ``key`` (nothing there: nothing to do)."""

    @abstractmethod
    def listing(self, prefix: str) -> list[Listed]:
        """Every object whose key starts with ``prefix``."""

    def verify(self) -> datetime:
        """Refuse a store whose conditional writes are not conditional (:class:`StoreError`, its cause naming what
        the store let happen); returns the store's clock of now (when it last wrote the probe).

        One probe key, four writes: a create-if-absent (must win), a second one (must lose), a swap on the version
        the first returned (must win: the object is still at it), and a swap on that same, now stale, version
        (must lose). The last is what a lease rests on: a run that lost its lease holds a stale version, and its
        swap must not land."""
        key = f"probes/{uuid.uuid4().hex}"
        first = self.create(key, b"first")
        if first is None:
            raise StoreError(self.location, "a fresh key was already taken")
        try:
            if self.create(key, b"second") is not None:
                raise StoreError(
                    self.location,
                    "it let a second create-if-absent of one key succeed, so two runs could both take one object",
                )
            if self.swap(key, b"swapped", first) is None:
                raise StoreError(
                    self.location,
                    "it refused a compare-and-swap on an object's current version, so no run could renew its lease",
                )
            if self.swap(key, b"stale", first) is not None:
                raise StoreError(
                    self.location,
                    "it let a compare-and-swap on a stale version succeed, so a run that lost its lease could still "
                    "write",
                )
            seen = self.read(key)
            return seen.modified if seen is not None else datetime.now(timezone.utc)
        finally:
            with contextlib.suppress(StoreError):
                self.remove(key)


def open_store(url: str) -> Store:
    """The store a journal URL names: ``file:///folder`` (a shared folder), or a bucket
    (``s3://bucket/prefix?endpoint=...&region=...``, ``gs://bucket/prefix``, ``azblob://container/prefix``,
    gocloud.dev's URL grammar, as Pulumi's self-managed backends take it)."""
    scheme = url.split("://", 1)[0].lower()
    if scheme == "file":
        from .folder import FileStore

        return FileStore(url)
    if scheme in BUCKET_SCHEMES:
        from .bucket import BucketStore

        return BucketStore(url)
    raise StoreError(url, "it is not a file://, s3://, gs:// or azblob:// URL")
