"""A store in a folder named by a ``file://`` URL (a shared mount, or a folder of this machine)."""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import tempfile
from datetime import datetime, timezone
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from . import Listed, Store, Stored, StoreError


class FileStore(Store):
    """A folder named by a ``file://`` URL (a shared mount, or a folder of this machine): create-if-absent by
    ``link(2)`` of a finished temporary file, compare-and-swap by a rename under an exclusive lock of the key.
    The version is a digest of the bytes (the journal's own content changes with every write)."""

    def __init__(self, url: str) -> None:
        self.location = url.split("?", 1)[0]
        self.root = Path(urlsplit(url).path or "/")

    def _path(self, key: str) -> Path:
        return self.root / key

    def _finished(self, path: Path, data: bytes) -> str:
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
        with os.fdopen(fd, "wb") as out:
            out.write(data)
            out.flush()
            os.fsync(out.fileno())
        return tmp

    def create(self, key: str, data: bytes) -> str | None:
        path = self._path(key)
        try:
            tmp = self._finished(path, data)
            try:
                os.link(tmp, path)
            except FileExistsError:
                return None
            finally:
                os.unlink(tmp)
        except OSError as exc:
            raise StoreError(self.location, exc.strerror or str(exc)) from exc
        return _digest(data)

    def read(self, key: str) -> Stored | None:
        path = self._path(key)
        try:
            data = path.read_bytes()
            modified = datetime.fromtimestamp(path.stat().st_mtime, timezone.utc)
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise StoreError(self.location, exc.strerror or str(exc)) from exc
        return Stored(data, _digest(data), modified)

    def swap(self, key: str, data: bytes, version: str) -> str | None:
        path = self._path(key)
        try:
            with _locked(path.with_name(path.name + ".lock")):
                try:
                    current = path.read_bytes()
                except FileNotFoundError:
                    return None
                if _digest(current) != version:
                    return None
                tmp = self._finished(path, data)
                os.replace(tmp, path)
        except OSError as exc:
            raise StoreError(self.location, exc.strerror or str(exc)) from exc
        return _digest(data)

    def remove(self, key: str) -> None:
        path = self._path(key)
        try:
            with _locked(path.with_name(path.name + ".lock")):
                path.unlink(missing_ok=True)
            path.with_name(path.name + ".lock").unlink(missing_ok=True)
        except OSError as exc:
            raise StoreError(self.location, exc.strerror or str(exc)) from exc

    def listing(self, prefix: str) -> list[Listed]:
        folder = self._path(prefix).parent if not prefix.endswith("/") else self._path(prefix)
        found: list[Listed] = []
        try:
            names = sorted(folder.rglob("*")) if folder.is_dir() else []
        except OSError as exc:
            raise StoreError(self.location, exc.strerror or str(exc)) from exc
        for path in names:
            key = path.relative_to(self.root).as_posix()
            if not key.startswith(prefix) or path.name.startswith(".tmp-") or path.name.endswith(".lock"):
                continue
            try:
                seen = path.stat()
                if not path.is_file():
                    continue
                data = path.read_bytes()
            except OSError:
                continue  # gone meanwhile
            modified = datetime.fromtimestamp(seen.st_mtime, timezone.utc)
            found.append(Listed(key, _digest(data), seen.st_size, modified))
        return found


@contextlib.contextmanager
def _locked(lock: Path) -> Any:
    lock.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    fd = os.open(lock, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()
