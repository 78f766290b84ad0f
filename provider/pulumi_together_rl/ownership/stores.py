"""Object stores a shared create journal lives in: a bucket (``s3://``, ``gs://``, ``azblob://``, reached with
``obstore``) or a folder named by a ``file://`` URL, each with the two atomic writes the journal is built on.

* **create if absent** (:meth:`Store.create`): S3 ``If-None-Match: *``, GCS ``ifGenerationMatch=0``, Azure
  ``If-None-Match: *``; a folder: a hard link of a finished temporary file (``link(2)`` fails if the name
  exists). Of many writers of one key, exactly one wins.
* **compare and swap** (:meth:`Store.swap`): S3 and Azure ``If-Match: <etag>``, GCS the generation; a folder: a
  rename under an exclusive lock, after checking the content is still the version read.

"Supports the header" is not "atomic": some S3-compatible servers accept ``If-None-Match`` and let every writer
win. :meth:`Store.verify` refuses such a store at its first use (a second create of one key must fail), in one
sentence naming it. Every version is an opaque string (an ETag, a generation, a digest of a file's bytes); every
``modified`` is the store's own clock (the server's ``Last-Modified``, the folder's ``mtime``), which is what
leases are judged by: no machine's clock is compared with another's.

``obstore`` is imported only here, and only when a bucket is used: a folder journal costs nothing of it.
"""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import hashlib
import os
import re
import tempfile
import uuid
from abc import ABC, abstractmethod
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs, urlsplit

if TYPE_CHECKING:
    from obstore import UpdateVersion
    from obstore.store import ClientConfig, RetryConfig

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
        """Refuse a store whose create-if-absent lets a second writer of one key win (:class:`StoreError`);
        returns the store's clock of now (when it wrote the probe)."""
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
        return FileStore(url)
    if scheme in BUCKET_SCHEMES:
        return BucketStore(url)
    raise StoreError(url, "it is not a file://, s3://, gs:// or azblob:// URL")


# ------------------------------------------------------------------------------------------------ a folder


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


# ------------------------------------------------------------------------------------------------ a bucket


REQUEST_TIMEOUT = timedelta(seconds=20)
"""How long one request to a bucket may take (with its retries) before the journal says it cannot be used."""


class BucketStore(Store):
    """A bucket (and prefix) reached with ``obstore``, from a gocloud.dev URL as Pulumi's backends take it."""

    def __init__(self, url: str) -> None:
        import obstore  # only a bucket journal pays for it
        from obstore.store import AzureStore, GCSStore, S3Store

        self._obstore = obstore
        parts = urlsplit(url)
        scheme = parts.scheme.lower()
        query = {k: v[-1] for k, v in parse_qs(parts.query).items()}
        bucket, prefix = parts.netloc, parts.path.strip("/")
        self.location = f"{scheme}://{bucket}/{prefix}".rstrip("/")
        retry: RetryConfig = {"max_retries": 3, "retry_timeout": REQUEST_TIMEOUT}
        options: ClientConfig = {"timeout": "15s", "connect_timeout": "5s"}
        if scheme == "s3":
            endpoint = query.get("endpoint", "")
            insecure = any(query.get(flag, "").lower() == "true" for flag in ("disableSSL", "disable_https"))
            if endpoint and "://" not in endpoint:
                endpoint = ("http://" if insecure else "https://") + endpoint
            if endpoint.startswith("http://"):
                options["allow_http"] = True
            config: dict[str, Any] = {"conditional_put": "etag"}
            if endpoint:
                config["endpoint"] = endpoint
                self.location += f"?endpoint={endpoint}"
            config.update(_aws_profile(query.get("profile")))
            if query.get("region"):
                config["region"] = query["region"]
            path_style = query.get("s3ForcePathStyle", query.get("use_path_style", "")).lower() == "true"
            if path_style or endpoint:
                config["virtual_hosted_style_request"] = False
            self._store: Any = S3Store(
                bucket, prefix=prefix or None, client_options=options, retry_config=retry, **config
            )
        elif scheme == "gs":
            self._store = GCSStore(bucket, prefix=prefix or None, client_options=options, retry_config=retry)
        elif scheme == "azblob":
            self._store = AzureStore(
                bucket, prefix=prefix or None, client_options=options, retry_config=retry
            )
        else:
            raise StoreError(url, "it is not an s3://, gs:// or azblob:// URL")

    def _fail(self, exc: Exception) -> StoreError:
        name, text = type(exc).__name__, str(exc)
        # obstore's messages run to several lines of request detail: the status and the store's error code are
        # what a person acts on.
        status = re.search(r"status code: (\d{3}[A-Za-z ]*)", text)
        code = re.search(r"<Code>([^<]{1,64})</Code>", text)
        said = "; ".join(m.group(1).strip() for m in (status, code) if m) or text.split("\n", 1)[0][-200:]
        if "Unauthenticated" in name or "PermissionDenied" in name or re.search(r"\b40[13]\b", said):
            cause = f"it refused this machine's credentials ({said})"
        elif isinstance(exc, FileNotFoundError) or "NotFound" in name:
            cause = f"it does not exist ({said})"
        else:
            cause = f"it could not be reached ({said})"
        return StoreError(self.location, cause)

    def create(self, key: str, data: bytes) -> str | None:
        from obstore.exceptions import AlreadyExistsError, PreconditionError

        try:
            result = self._obstore.put(self._store, key, data, mode="create")
        except (AlreadyExistsError, PreconditionError):
            return None
        except Exception as exc:
            raise self._fail(exc) from exc
        return _version(result)

    def read(self, key: str) -> Stored | None:
        try:
            answer = self._obstore.get(self._store, key)
            data = bytes(answer.bytes())
        except FileNotFoundError:
            return None
        except Exception as exc:
            if "NotFound" in type(exc).__name__:
                return None
            raise self._fail(exc) from exc
        meta = answer.meta
        return Stored(data, _version(meta), meta["last_modified"])

    def swap(self, key: str, data: bytes, version: str) -> str | None:
        from obstore.exceptions import PreconditionError

        try:
            result = self._obstore.put(self._store, key, data, mode=_update_mode(version))
        except (PreconditionError, FileNotFoundError):
            return None
        except Exception as exc:
            if "NotFound" in type(exc).__name__:
                return None
            raise self._fail(exc) from exc
        return _version(result)

    def remove(self, key: str) -> None:
        try:
            self._obstore.delete(self._store, key)
        except FileNotFoundError:
            return
        except Exception as exc:
            if "NotFound" in type(exc).__name__:
                return
            raise self._fail(exc) from exc

    def listing(self, prefix: str) -> list[Listed]:
        try:
            found = []
            for chunk in self._obstore.list(self._store, prefix=prefix):
                for meta in chunk:
                    found.append(Listed(meta["path"], _version(meta), meta["size"], meta["last_modified"]))
            return found
        except Exception as exc:
            raise self._fail(exc) from exc


def _aws_profile(named: str | None) -> dict[str, str]:
    """Keys (and region) of an AWS profile of the shared files, when the environment names no keys: what the CLI
    (the AWS SDK for Go) also reads on a laptop, and what obstore does not (it reads the environment, web
    identity, container and instance credentials). Only static keys: a profile of SSO or ``credential_process``
    needs ``aws configure export-credentials`` (docs/journal.md)."""
    import configparser

    env = os.environ
    if env.get("AWS_ACCESS_KEY_ID") or env.get("AWS_WEB_IDENTITY_TOKEN_FILE"):
        return {}
    profile = named or env.get("AWS_PROFILE") or env.get("AWS_DEFAULT_PROFILE") or "default"
    home = Path(os.path.expanduser("~"))
    found: dict[str, str] = {}
    keys = configparser.ConfigParser(interpolation=None)
    keys.read(env.get("AWS_SHARED_CREDENTIALS_FILE") or home / ".aws" / "credentials")
    if keys.has_option(profile, "aws_access_key_id") and keys.has_option(profile, "aws_secret_access_key"):
        found["access_key_id"] = keys.get(profile, "aws_access_key_id")
        found["secret_access_key"] = keys.get(profile, "aws_secret_access_key")
        if keys.has_option(profile, "aws_session_token"):
            found["token"] = keys.get(profile, "aws_session_token")
    settings = configparser.ConfigParser(interpolation=None)
    settings.read(env.get("AWS_CONFIG_FILE") or home / ".aws" / "config")
    section = profile if profile == "default" else f"profile {profile}"
    if not (env.get("AWS_REGION") or env.get("AWS_DEFAULT_REGION")) and settings.has_option(
        section, "region"
    ):
        found["region"] = settings.get(section, "region")
    return found


def _version(meta: Any) -> str:
    """An object's version as one string: its ETag (S3, Azure) or its generation (GCS) with it."""
    etag = meta.get("e_tag") or ""
    generation = meta.get("version") or ""
    return f"{etag}#{generation}" if generation else etag


def _update_mode(version: str) -> UpdateVersion:
    etag, _, generation = version.partition("#")
    mode: UpdateVersion = {"e_tag": etag}
    if generation:
        mode["version"] = generation
    return mode
