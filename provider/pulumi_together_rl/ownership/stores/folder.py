"""A store in a folder: this machine's journal folder, or the one a ``file://`` URL names (a shared mount).

The same trust rules hold wherever the folder is, because whoever can write it can plant an entry that hands a
create someone else's object, or remove the record that protects one:

* the folder, and every folder and file in it, belongs to this user and nobody else can write it (else the
  store refuses to be used, or the file is skipped, saying which);
* below the folder itself (whose path is the user's to choose), nothing is followed through a symbolic link:
  every step is opened relative to the one above with ``O_NOFOLLOW``, and folders are made the same way;
* a file's size is checked (``fstat`` of the opened file) before any of it is read.

Create-if-absent is ``link(2)`` of a finished temporary file (it fails if the name exists); compare-and-swap is a
rename under an exclusive ``flock`` of the folder's ``.lock``, after checking the bytes are still the version
read (a digest of them). Both are followed by an ``fsync`` of the folder, so that a crash keeps what was
answered. A writer's hold (:meth:`FolderStore.hold`) is an exclusive ``flock`` of ``<stem>.lock`` beside its
entry: the kernel drops it when the process dies, in any pid namespace, so a reader knows a dead writer at once
instead of waiting out its lease; on a file system without ``flock`` the lease's clock decides.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import os
import stat
import uuid
from collections.abc import Iterator
from datetime import datetime, timezone
from pathlib import Path
from urllib.parse import unquote, urlsplit

from . import MAX_READ, Hold, Listed, Store, Stored, StoreError, Unreadable

_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC
_LOCK = ".lock"
_TMP = ".tmp-"


def untrusted(seen: os.stat_result, what: str) -> str | None:
    """Why a file or folder as ``fstat`` saw it is not this user's alone; None when it is."""
    if what == "folder" and not stat.S_ISDIR(seen.st_mode):
        return "is not a folder"
    if what == "file" and not stat.S_ISREG(seen.st_mode):
        return "is not a regular file"
    if seen.st_uid != os.geteuid():
        return f"belongs to another user (uid {seen.st_uid})"
    if seen.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        return f"can be written by others (mode {stat.S_IMODE(seen.st_mode):04o})"
    return None


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


class _Flock(Hold):
    """An exclusive ``flock`` this process holds, on an open file."""

    def __init__(self, fd: int) -> None:
        self._fd: int | None = fd

    def release(self) -> None:
        fd, self._fd = self._fd, None
        if fd is not None:
            with contextlib.suppress(OSError):
                fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)


class FolderStore(Store):
    """A folder held to the trust rules of the module docstring. ``instead`` completes the sentence of a folder
    that cannot be trusted: the other place the user can point the journal at."""

    def __init__(self, root: Path, *, location: str | None = None, instead: str = "") -> None:
        self.root = root
        self.location = location or str(root)
        self._instead = instead

    @classmethod
    def at_url(cls, url: str) -> FolderStore:
        """The folder of a ``file:///path`` URL."""
        path = unquote(urlsplit(url).path) or "/"
        return cls(
            Path(path),
            location=url.split("?", 1)[0],
            instead="or set TOGETHER_RL_JOURNAL_URL to a folder of your own",
        )

    def where(self, key: str) -> str:
        return str(self.root / key)

    # ------------------------------------------------------------------------------------ folders

    def _refused(self, folder: Path, why: str) -> StoreError:
        todo = f"Make it yours alone (`chown $(id -u) {folder} && chmod 700 {folder}`)"
        return StoreError(
            self.location,
            f"the folder {folder} {why}, so nothing in it can be trusted",
            f"{todo}{', ' + self._instead if self._instead else ''}",
        )

    def _failed(self, exc: OSError, path: Path) -> StoreError:
        instead = f", {self._instead}" if self._instead else ""
        return StoreError(
            self.location,
            f"{path} cannot be used ({exc.strerror or exc})",
            f"Make {self.root} a folder this user can write{instead}",
        )

    @contextlib.contextmanager
    def _folder(self, parts: list[str], create: bool) -> Iterator[int | None]:
        """The folder ``root/parts...`` opened, each step without following a link and checked; None when it does
        not exist (``create`` false)."""
        fds: list[int] = []
        try:
            try:
                if create:
                    self.root.mkdir(parents=True, exist_ok=True, mode=0o700)
                fd = os.open(self.root, _DIR)
            except FileNotFoundError:
                yield None
                return
            except OSError as exc:
                raise self._failed(exc, self.root) from exc
            fds.append(fd)
            why = untrusted(os.fstat(fd), "folder")
            if why:
                raise self._refused(self.root, why)
            here = self.root
            for part in parts:
                here = here / part
                try:
                    fd = self._step(fds[-1], part, create)
                except FileNotFoundError:
                    yield None
                    return
                except OSError as exc:
                    if exc.errno in (errno.ELOOP, errno.ENOTDIR):
                        raise self._refused(here, "is a symbolic link or not a folder") from exc
                    raise self._failed(exc, here) from exc
                fds.append(fd)
                why = untrusted(os.fstat(fd), "folder")
                if why:
                    raise self._refused(here, why)
            yield fds[-1]
        finally:
            for fd in fds:
                os.close(fd)

    @staticmethod
    def _step(parent: int, part: str, create: bool) -> int:
        flags = _DIR | os.O_NOFOLLOW
        try:
            return os.open(part, flags, dir_fd=parent)
        except FileNotFoundError:
            if not create:
                raise
        with contextlib.suppress(FileExistsError):
            os.mkdir(part, 0o700, dir_fd=parent)
        return os.open(part, flags, dir_fd=parent)

    @staticmethod
    def _split(key: str) -> tuple[list[str], str]:
        parts = [p for p in key.split("/") if p]
        if not parts or any(p in (".", "..") or p.startswith(".") for p in parts):
            raise ValueError(f"not a key of this store: {key!r}")
        return parts[:-1], parts[-1]

    @contextlib.contextmanager
    def _locked(self, folder: int) -> Iterator[None]:
        fd = os.open(_LOCK, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600, dir_fd=folder)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)  # closing drops the lock

    # ------------------------------------------------------------------------------------ files

    def _read(self, folder: int, name: str, key: str, limit: int) -> Stored | None:
        try:
            fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=folder)
        except FileNotFoundError:
            return None
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise Unreadable(key, "it is a symbolic link") from exc
            raise
        try:
            seen = os.fstat(fd)
            why = untrusted(seen, "file")
            if why:
                raise Unreadable(key, f"it {why}")
            if seen.st_size > limit:
                raise Unreadable(key, f"it is {seen.st_size} bytes, more than any entry this provider writes")
            chunks, left = [], seen.st_size + 1
            while left > 0:
                chunk = os.read(fd, left)
                if not chunk:
                    break
                chunks.append(chunk)
                left -= len(chunk)
        finally:
            os.close(fd)
        data = b"".join(chunks)
        if len(data) > limit:  # it grew while being read
            raise Unreadable(key, f"it is more than {limit} bytes, more than any entry this provider writes")
        return Stored(data, _digest(data), datetime.fromtimestamp(seen.st_mtime, timezone.utc))

    def _finished(self, folder: int, data: bytes) -> str:
        """A temporary file holding ``data``, flushed to disk: its name."""
        name = f"{_TMP}{uuid.uuid4().hex}"
        fd = os.open(
            name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600, dir_fd=folder
        )
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            os.fsync(fd)
        finally:
            os.close(fd)
        return name

    # ------------------------------------------------------------------------------------ holds

    @staticmethod
    def _lock_name(name: str) -> str:
        """The hold of ``<stem>.json`` is an ``flock`` of ``<stem>.lock`` beside it (as releases 0.2 to 0.4 kept
        it, so that their entries are judged the same way)."""
        return name.rsplit(".", 1)[0] + ".lock"

    def hold(self, key: str) -> Hold | None:
        parts, name = self._split(key)
        with self._folder(parts, create=True) as folder:
            assert folder is not None
            try:
                fd = os.open(
                    self._lock_name(name),
                    os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC,
                    0o600,
                    dir_fd=folder,
                )
            except OSError as exc:
                if exc.errno == errno.ELOOP:
                    return None  # not a lock this provider made: the entry is not to be acted on
                raise self._failed(exc, self.root / key) from exc
        if untrusted(os.fstat(fd), "file"):
            os.close(fd)
            return None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            os.close(fd)
            if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                return None
            return Hold()  # no flock on this file system (some network mounts): the lease's clock tells
        return _Flock(fd)

    def holder_alive(self, key: str) -> bool | None:
        parts, name = self._split(key)
        with self._folder(parts, create=False) as folder:
            if folder is None:
                return False
            try:
                fd = os.open(
                    self._lock_name(name),
                    os.O_RDWR | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC,
                    dir_fd=folder,
                )
            except FileNotFoundError:
                return False
            except OSError:
                return True  # cannot tell, or not a lock of ours: counts as held, so nobody takes it
        try:
            if untrusted(os.fstat(fd), "file"):
                return True
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                return True
            return None
        finally:
            os.close(fd)  # closing drops a lock just taken
        return False

    # ------------------------------------------------------------------------------------ the interface

    def create(self, key: str, data: bytes) -> str | None:
        parts, name = self._split(key)
        with self._folder(parts, create=True) as folder:
            assert folder is not None
            try:
                tmp = self._finished(folder, data)
                try:
                    os.link(tmp, name, src_dir_fd=folder, dst_dir_fd=folder, follow_symlinks=False)
                except FileExistsError:
                    return None
                finally:
                    os.unlink(tmp, dir_fd=folder)
                os.fsync(folder)
            except OSError as exc:
                raise self._failed(exc, self.root / key) from exc
        return _digest(data)

    def read(self, key: str, limit: int = MAX_READ) -> Stored | None:
        parts, name = self._split(key)
        with self._folder(parts, create=False) as folder:
            if folder is None:
                return None
            try:
                return self._read(folder, name, key, limit)
            except OSError as exc:
                raise self._failed(exc, self.root / key) from exc

    def swap(self, key: str, data: bytes, version: str) -> str | None:
        parts, name = self._split(key)
        with self._folder(parts, create=False) as folder:
            if folder is None:
                return None
            try:
                with self._locked(folder):
                    try:
                        current = self._read(folder, name, key, MAX_READ)
                    except Unreadable:
                        return None  # not what this writer read: not its version
                    if current is None or current.version != version:
                        return None
                    tmp = self._finished(folder, data)
                    os.rename(tmp, name, src_dir_fd=folder, dst_dir_fd=folder)
                    os.fsync(folder)
            except OSError as exc:
                raise self._failed(exc, self.root / key) from exc
        return _digest(data)

    def remove(self, key: str) -> None:
        parts, name = self._split(key)
        with self._folder(parts, create=False) as folder:
            if folder is None:
                return
            try:
                with self._locked(folder):
                    for gone in (name, self._lock_name(name)):
                        with contextlib.suppress(FileNotFoundError):
                            os.unlink(gone, dir_fd=folder)
            except OSError as exc:
                raise self._failed(exc, self.root / key) from exc

    def listing(self, prefix: str, *, recursive: bool = True) -> list[Listed]:
        head, _, start = prefix.rpartition("/")
        parts = [p for p in head.split("/") if p]
        found: list[Listed] = []
        with self._folder(parts, create=False) as folder:
            if folder is None:
                return found
            try:
                self._walk(folder, head, start, recursive, found)
            except OSError as exc:
                raise self._failed(exc, self.root / head) from exc
        return sorted(found, key=lambda item: item.key)

    def _walk(self, folder: int, head: str, start: str, recursive: bool, found: list[Listed]) -> None:
        with os.scandir(folder) as names:
            listed = [(n.name, n.is_dir(follow_symlinks=False)) for n in names]
        for name, is_dir in listed:
            if name.startswith(".") or not name.startswith(start):
                continue
            key = f"{head}/{name}" if head else name
            if is_dir:
                if recursive:
                    self._walk_into(folder, name, key, found)
                continue
            # Anything else is read as a file would be (a link, a FIFO, a device: refused, and said so).
            try:
                stored = self._read(folder, name, key, MAX_READ)
            except Unreadable as exc:
                found.append(Listed(key, "", 0, datetime.fromtimestamp(0, timezone.utc), refused=exc.why))
                continue
            if stored is not None:
                found.append(Listed(key, stored.version, len(stored.data), stored.modified, data=stored.data))

    def _walk_into(self, folder: int, name: str, key: str, found: list[Listed]) -> None:
        try:
            inner = os.open(name, _DIR | os.O_NOFOLLOW, dir_fd=folder)
        except FileNotFoundError:
            return  # removed meanwhile
        try:
            why = untrusted(os.fstat(inner), "folder")
            if why:
                raise self._refused(self.root / key, why)
            self._walk(inner, key, "", True, found)
        finally:
            os.close(inner)
