"""A store in a bucket (``s3://``, ``gs://``, ``azblob://``), reached with ``obstore`` (imported only here)."""

from __future__ import annotations

import os
import re
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs, unquote, urlsplit

from ... import backend
from . import MAX_READ, Listed, Store, Stored, StoreError, Unreadable

if TYPE_CHECKING:
    from obstore import UpdateVersion
    from obstore.store import AzureConfig, ClientConfig, GCSConfig, RetryConfig


REQUEST_TIMEOUT = timedelta(seconds=20)
"""How long one request to a bucket may take (with its retries) before the journal says it cannot be used."""


class BucketStore(Store):
    """A bucket (and prefix) reached with ``obstore``, from a gocloud.dev URL as Pulumi's backends take it."""

    def __init__(self, url: str) -> None:
        import obstore  # only a bucket journal pays for it

        self._obstore = obstore
        try:
            self._open(url)
        except StoreError:
            raise
        except Exception as exc:  # obstore refuses a configuration it cannot use (no account, a bad option)
            raise StoreError(
                url.split("?", 1)[0], f"it cannot be opened ({str(exc).splitlines()[0][:200]})"
            ) from exc

    def _open(self, url: str) -> None:
        from obstore.store import AzureStore, GCSStore, S3Store

        parts = urlsplit(url)
        scheme = parts.scheme.lower()
        queries = parse_qs(parts.query)
        query = {k: v[-1] for k, v in queries.items()}
        bucket = parts.netloc
        # The keys' prefix and an S3 endpoint read exactly as the CLI reads them (and the backend's identity: one
        # rule, :mod:`...backend`): gocloud's ``prefix`` then the path; a bare endpoint's scheme from the flags.
        prefix = backend.key_prefix(unquote(parts.path), (queries.get("prefix") or [""])[0]).strip("/")
        self.location = backend.printable_url(url)  # as the user wrote it: what every line about it names
        retry: RetryConfig = {"max_retries": 3, "retry_timeout": REQUEST_TIMEOUT}
        options: ClientConfig = {"timeout": "15s", "connect_timeout": "5s"}
        if scheme == "s3":
            endpoint = backend.endpoint_of(queries)
            if endpoint.startswith("http://"):
                options["allow_http"] = True
            config: dict[str, Any] = {"conditional_put": "etag"}
            if endpoint:
                config["endpoint"] = endpoint
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
            gcs, where = _gcs_config(query)
            if where:
                options["allow_http"] = where.startswith("http://")
            self._store = GCSStore(
                bucket, prefix=prefix or None, config=gcs, client_options=options, retry_config=retry
            )
        elif scheme == "azblob":
            azure, _ = _azure_config(query)
            if azure.get("endpoint", "").startswith("http://"):
                options["allow_http"] = True
            self._store = AzureStore(
                bucket, prefix=prefix or None, config=azure, client_options=options, retry_config=retry
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
        # An S3 or Azure error names its code in XML, a GCS JSON API error (an emulator's) its message in JSON.
        code = re.search(r"<Code>([^<]{1,64})</Code>", text) or re.search(
            r'"message":\s*"([^"]{1,100})"', text
        )
        said = "; ".join(m.group(1).strip() for m in (status, code) if m) or text.split("\n", 1)[0][-200:]
        if "Unauthenticated" in name or "PermissionDenied" in name or re.search(r"\b40[13]\b", said):
            cause = f"it refused this machine's credentials ({said})"
        elif isinstance(exc, FileNotFoundError) or "NotFound" in name:
            cause = f"it does not exist ({said})"
        elif status and status.group(1).startswith("4"):
            cause = f"it refused the request ({said})"
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


def _gcs_config(query: dict[str, str]) -> tuple[GCSConfig, str]:
    """obstore's settings for a ``gs://`` URL as gocloud.dev (the CLI) reads it, and the emulator's URL ("": none).

    ``STORAGE_EMULATOR_HOST`` (``host:port``, or a URL) sends every request there without authentication, as
    gocloud.dev and Google's SDKs do. obstore's ``skip_signature`` leaves the credential off reads but not off writes
    (object_store 0.14 asks its credential chain before every PUT, the metadata server included), so the emulator is
    given a static bearer token instead: a placeholder no server checks, never a credential. The URL's
    ``anonymous=true`` skips the credential where obstore can."""
    config: GCSConfig = {}
    host = os.environ.get("STORAGE_EMULATOR_HOST", "").strip()
    if host:
        base = (host if "://" in host else f"http://{host}").rstrip("/")
        config["base_url"] = base
        config["bearer_token"] = "storage-emulator-needs-no-credential"
        return config, base
    if query.get("anonymous", "").lower() in ("true", "1"):
        config["skip_signature"] = True
    return config, ""


def _azure_config(query: dict[str, str]) -> tuple[AzureConfig, str]:
    """obstore's settings for an ``azblob://`` URL as gocloud.dev (the CLI) reads it, and what the printable location
    adds to the URL ("" for Azure's own endpoint).

    gocloud.dev takes the account from ``AZURE_STORAGE_ACCOUNT`` (or the URL's ``storage_account``), a shared key
    from ``AZURE_STORAGE_KEY``, and builds the service URL from ``AZURE_STORAGE_DOMAIN``, ``AZURE_STORAGE_PROTOCOL``,
    ``AZURE_STORAGE_IS_CDN`` and ``AZURE_STORAGE_IS_LOCAL_EMULATOR``, each overridden by the URL's ``domain``,
    ``protocol``, ``cdn`` and ``localemu``: ``<protocol>://<account>.<domain>``, or ``<protocol>://<domain>/<account>``
    for the local emulator (Azurite) and any domain on ``localhost`` or ``127.0.0.1``. obstore reads other names for
    the account and key (``AZURE_STORAGE_ACCOUNT_NAME``, ``AZURE_STORAGE_ACCOUNT_KEY``), so they are passed to it;
    a SAS token (``AZURE_STORAGE_SAS_TOKEN``) and Azure's other credentials obstore reads itself."""
    env = os.environ

    def flag(value: str) -> bool:
        return value.strip().lower() in ("1", "t", "true")

    account = query.get("storage_account") or env.get("AZURE_STORAGE_ACCOUNT", "")
    domain = query.get("domain") or env.get("AZURE_STORAGE_DOMAIN") or "blob.core.windows.net"
    protocol = (query.get("protocol") or env.get("AZURE_STORAGE_PROTOCOL") or "https").lower()
    emulator = flag(query.get("localemu") or env.get("AZURE_STORAGE_IS_LOCAL_EMULATOR", ""))
    cdn = flag(query.get("cdn") or env.get("AZURE_STORAGE_IS_CDN", ""))
    config: AzureConfig = {}
    if account:
        config["account_name"] = account
        if env.get("AZURE_STORAGE_KEY"):
            config["account_key"] = env["AZURE_STORAGE_KEY"]
    if emulator or domain.startswith(("127.0.0.1", "localhost")):
        config["endpoint"] = f"{protocol}://{domain}/{account}"
    elif cdn:
        config["endpoint"] = f"{protocol}://{domain}"
    elif account:
        config["endpoint"] = f"{protocol}://{account}.{domain}"
    shown = [f"{name}={value}" for name, value in (("domain", domain), ("protocol", protocol))]
    custom = domain != "blob.core.windows.net" or protocol != "https"
    return config, ("?" + "&".join(shown) if custom else "")


def _version(meta: Any) -> str:
    """An object's version as one string: its ETag (S3, Azure) or its generation (GCS) with it. An ETag is kept in
    its quoted HTTP form whichever way the store gave it (Azure's listing gives it bare, its reads and writes
    quoted), so on S3 and Azure a version listed equals the version read of one object, and a swap sends it as
    ``If-Match`` takes it. A GCS listing (obstore lists with the XML API) carries no generation: a version listed
    there never equals one read, and is no version to swap on."""
    etag = meta.get("e_tag") or ""
    if etag and not etag.startswith(('"', "W/")):
        etag = f'"{etag}"'
    generation = meta.get("version") or ""
    return f"{etag}#{generation}" if generation else etag


def _update_mode(version: str) -> UpdateVersion:
    """The conditional put of a swap: ``If-Match: <etag>`` (S3, Azure), ``x-goog-if-generation-match:
    <generation>`` (GCS, which obstore sends only when the generation is given)."""
    etag, _, generation = version.partition("#")
    mode: UpdateVersion = {"e_tag": etag}
    if generation:
        mode["version"] = generation
    return mode
