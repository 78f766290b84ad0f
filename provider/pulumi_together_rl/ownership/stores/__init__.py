"""Where the create journal's bytes live: one small interface, and the stores that implement it as peers.

* **create if absent** (:meth:`Store.create`): S3 ``If-None-Match: *``, GCS ``ifGenerationMatch=0``, Azure
  ``If-None-Match: *``; a folder: a hard link of a finished temporary file (``link(2)`` fails if the name
  exists). Of many writers of one key, exactly one wins.
* **compare and swap** (:meth:`Store.swap`): S3 and Azure ``If-Match: <etag>``, GCS the generation; a folder: a
  rename under an exclusive lock of the key, after checking its bytes are still the version read.
* **read** (bounded: a larger object is :class:`Unreadable` before its bytes are fetched), **list**, **remove**;
* **a hold** (where the store has one): a folder's ``flock`` proves a writer alive, in any pid namespace;
* **the store's clock**: every ``modified`` is the store's own (the server's ``Last-Modified``, the folder's
  ``mtime``), and :meth:`Store.verify` tells the store's now at first use: leases and ages are judged on it, so
  no machine's clock is compared with another's.

The stores: :class:`.folder.FolderStore` (this machine's journal folder, and a ``file://`` URL: a shared mount),
:class:`.bucket.BucketStore` (``s3://``, ``gs://``, ``azblob://``; ``obstore``, imported only there). A folder is
held to the same trust rules wherever it is (this user's alone, nothing followed through a symbolic link, sizes
checked before reading).

"Supports the header" is not "atomic": some S3-compatible servers accept ``If-None-Match`` and let every writer
win, or honour it and ignore ``If-Match``. :meth:`Store.verify` refuses such a store at its first use, in one
sentence naming what it let happen. Every version is an opaque string (an ETag, a generation, a digest of a
file's bytes).
"""

from __future__ import annotations

import contextlib
import dataclasses
import uuid
from abc import ABC, abstractmethod
from datetime import datetime

BUCKET_SCHEMES = ("s3", "gs", "azblob")


class StoreError(Exception):
    """A store could not be used: ``cause`` says why, in words for the user's sentence."""

    def __init__(self, location: str, cause: str, todo: str | None = None) -> None:
        self.location = location
        self.cause = cause
        self.todo = todo
        """What the user can do about it, when the store knows better than its caller (a folder's owner)."""
        super().__init__(f"{location}: {cause}")


class Unreadable(Exception):
    """One object of a store that works is not to be read: too large, not a regular file of this user's, a
    symbolic link. ``why`` says which, for the line that skips it."""

    def __init__(self, key: str, why: str) -> None:
        self.key = key
        self.why = why
        super().__init__(f"{key}: {why}")


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
    refused: str | None = None
    """Why a folder's trust rules refuse it (it is not read then); None: it can be read."""
    data: bytes | None = None
    """Its bytes, when listing read them anyway (a folder reads each file for its version)."""


MAX_READ = 1 << 20
"""What :meth:`Store.read` reads at most unless told otherwise (the journal's objects are a few kilobytes)."""


class Hold:
    """A store's own proof that this process is alive and writing a key (:meth:`Store.hold`); this one, of a store
    that has none, proves nothing and holds nothing."""

    def release(self) -> None:
        """Give the hold up (a process that dies gives it up too)."""


class Store(ABC):
    """A flat namespace of small objects with create-if-absent and compare-and-swap (see the module docstring)."""

    location: str
    """Where it is, printable: a URL without credentials, or a folder's path."""

    @abstractmethod
    def where(self, key: str) -> str:
        """Where the object ``key`` is, for a sentence: its URL or its file."""

    @abstractmethod
    def create(self, key: str, data: bytes) -> str | None:
        """Write ``data`` at ``key`` only if nothing is there: its version, or None when something is."""

    @abstractmethod
    def read(self, key: str, limit: int = MAX_READ) -> Stored | None:
        """The object at ``key``, None when there is none; :class:`Unreadable` when it is larger than ``limit``
        bytes (checked before its bytes are fetched) or a folder's trust rules refuse it."""

    @abstractmethod
    def swap(self, key: str, data: bytes, version: str) -> str | None:
        """Replace the object at ``key`` only if it is still at ``version``: the new version, or None when it
        changed or went meanwhile."""

    @abstractmethod
    def remove(self, key: str) -> None:
        """Remove the object at ``key`` (nothing there: nothing to do)."""

    @abstractmethod
    def listing(self, prefix: str, *, recursive: bool = True) -> list[Listed]:
        """Every object whose key starts with ``prefix`` (``recursive`` false: only those with no ``/`` after
        it). An object a folder's trust rules refuse is left out."""

    def hold(self, key: str) -> Hold | None:
        """Hold ``key`` for as long as this process lives (or until :meth:`Hold.release`): a store's own proof of a
        live writer, where it has one (a folder: an exclusive ``flock``, which the kernel drops when the process
        dies, whatever the signal and whatever the pid namespace); None when another live process holds it. A
        store that has no such proof (a bucket) hands out a :class:`Hold` that proves nothing: there, only the
        lease's clock tells."""
        return Hold()

    def holder_alive(self, key: str) -> bool | None:
        """Whether a live process holds ``key`` (:meth:`hold`): True, False, or None when the store cannot tell."""
        return None

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
            if seen is None or seen.data != b"swapped":
                raise StoreError(self.location, "it did not keep what a compare-and-swap wrote")
            return seen.modified
        finally:
            with contextlib.suppress(StoreError):
                self.remove(key)


def open_store(url: str) -> Store:
    """The store a journal URL names: ``file:///folder`` (a shared folder), or a bucket
    (``s3://bucket/prefix?endpoint=...&region=...``, ``gs://bucket/prefix``, ``azblob://container/prefix``,
    gocloud.dev's URL grammar, as Pulumi's self-managed backends take it)."""
    scheme = url.split("://", 1)[0].lower()
    if scheme == "file":
        from .folder import FolderStore

        return FolderStore.at_url(url)
    if scheme in BUCKET_SCHEMES:
        from .bucket import BucketStore

        return BucketStore(url)
    raise StoreError(url, "it is not a file://, s3://, gs:// or azblob:// URL")
