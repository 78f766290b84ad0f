"""A store in a bucket (``s3://``, ``gs://``, ``azblob://``), reached with ``obstore`` (imported only here)."""

from __future__ import annotations

import os
import re
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs, urlsplit

from . import MAX_READ, Listed, Store, Stored, StoreError, Unreadable

if TYPE_CHECKING:
    from obstore import UpdateVersion
    from obstore.store import ClientConfig, RetryConfig


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

    def where(self, key: str) -> str:
        return f"{self.location.split('?', 1)[0]}/{key}"

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

    def read(self, key: str, limit: int = MAX_READ) -> Stored | None:
        try:
            answer = self._obstore.get(self._store, key)
            if answer.meta["size"] > limit:  # known from the answer's headers, before its body is read
                raise Unreadable(
                    key, f"it is {answer.meta['size']} bytes, more than any entry this provider writes"
                )
            data = bytes(answer.bytes())
        except Unreadable:
            raise
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

    def listing(self, prefix: str, *, recursive: bool = True) -> list[Listed]:
        try:
            found = []
            if not recursive:
                # A listing "by folder" names the objects at that level only; the prefix is the folder part.
                head = prefix.rpartition("/")[0]
                level = self._obstore.list_with_delimiter(self._store, prefix=head or None)
                metas = [m for m in level["objects"] if m["path"].startswith(prefix)]
                return [Listed(m["path"], _version(m), m["size"], m["last_modified"]) for m in metas]
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
