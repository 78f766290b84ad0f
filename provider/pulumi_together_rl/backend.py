"""The stack's backend, found the way the Pulumi CLI finds it: where a stack's state lives, and so part of which
declaration a resource is.

The CLI takes the first of:

1. ``PULUMI_BACKEND_URL``;
2. ``backend: url:`` in the project file (``Pulumi.yaml``, found from the working folder upwards);
3. ``current`` in ``$PULUMI_HOME/credentials.json`` (default ``~/.pulumi``), what ``pulumi login`` wrote;
4. else Pulumi Cloud (``https://api.pulumi.com``).

A provider process inherits the CLI's environment and runs in the program's folder (both faces), so it finds the
same backend as the command that started it. What it cannot see: a backend that a credential helper (CLI
>= 3.266) hands the CLI at run time; such a login reads as the ``current`` of ``credentials.json`` or the default.

Two stacks with the same organization, project and stack name in two backends (a developer's local backend next to
the team's bucket) are two stacks: :attr:`Backend.identity`, a digest of the backend's :attr:`Backend.location`, is
what tells them apart. The location is the URL as the CLI reads it (gocloud.dev blob URLs for buckets, ``file://``
folders, an HTTPS URL for Pulumi Cloud), made canonical: a folder resolved to its real absolute path; a bucket's key
prefix as the CLI builds it (the path without its leading slashes, one trailing slash added, after gocloud.dev's
``prefix`` query parameter), so ``s3://b/p``, ``s3://b/p/`` and ``s3://b?prefix=p/`` are one backend; a bucket's
endpoint kept (two servers' buckets of one name are two backends) with the scheme the CLI gives a bare one (https, or
http under ``disableSSL`` / ``disable_https``) and without a default port; every other query parameter (region,
path style, credentials profiles) dropped, since it changes how the store is reached, not which store it is. One
backend spelled two ways must be one identity: a create journal entry is found by it, and an entry not found is a
second GPU.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
from collections.abc import Mapping
from pathlib import Path
from urllib.parse import parse_qs, quote, unquote, urlsplit, urlunsplit

CLOUD = "https://api.pulumi.com"
"""The backend when nothing names one (what ``pulumi login`` with no URL logs into)."""

PROJECT_FILES = ("Pulumi.yaml", "Pulumi.yml", "Pulumi.json")

BUCKET_SCHEMES = ("s3", "gs", "azblob")
"""Self-managed backends in an object store (gocloud.dev blob URLs)."""


@dataclasses.dataclass(frozen=True)
class Backend:
    """A stack backend: its URL as configured, where that came from, and its canonical location."""

    url: str
    source: str
    """Where the URL came from: ``PULUMI_BACKEND_URL``, ``backend.url in /p/Pulumi.yaml``, ``current in
    ~/.pulumi/credentials.json``, or ``the default``."""
    location: str
    """The canonical location (see the module docstring): never a credential, safe to print and to store."""

    @property
    def scheme(self) -> str:
        """``file``, ``s3``, ``gs``, ``azblob``, or ``https`` (Pulumi Cloud or a self-hosted service)."""
        return self.location.split("://", 1)[0]

    @property
    def self_managed(self) -> bool:
        """A folder or a bucket (DIY), as opposed to a Pulumi Cloud (or self-hosted Pulumi service) backend."""
        return self.scheme == "file" or self.scheme in BUCKET_SCHEMES

    @property
    def identity(self) -> str:
        """A digest of :attr:`location`: the same backend, the same identity, on every machine (a bucket) or on
        this one (a folder)."""
        return hashlib.sha256(self.location.encode()).hexdigest()[:16]


def printable_url(url: str) -> str:
    """``url`` without a user:password part (a URL can carry one; a line must never)."""
    parts = urlsplit(url)
    if parts.username or parts.password:
        host = parts.hostname or ""
        if parts.port:
            host += f":{parts.port}"
        parts = parts._replace(netloc=host)
    return urlunsplit(parts)


def locate(cwd: str | os.PathLike[str] | None = None, environ: Mapping[str, str] | None = None) -> Backend:
    """The backend a ``pulumi`` command run in ``cwd`` (default: here) with ``environ`` uses."""
    env = os.environ if environ is None else environ
    here = Path(cwd or os.getcwd()).absolute()
    explicit = env.get("PULUMI_BACKEND_URL", "").strip()
    if explicit:
        return _backend(explicit, "PULUMI_BACKEND_URL", here, env)
    project = _project_file(here)
    if project is not None:
        url = _project_backend(project)
        if url:
            return _backend(url, f"backend.url in {project}", project.parent, env)
    home = Path(env.get("PULUMI_HOME") or Path(env.get("HOME") or os.path.expanduser("~")) / ".pulumi")
    credentials = home / "credentials.json"
    current = _current_login(credentials)
    if current:
        return _backend(current, f"current in {credentials}", here, env)
    return _backend(CLOUD, "the default", here, env)


def canonical(url: str, base: Path | None = None, environ: Mapping[str, str] | None = None) -> str:
    """The canonical location of backend ``url`` (a relative folder is taken from ``base``)."""
    env = os.environ if environ is None else environ
    text = url.strip()
    if text.startswith("file://"):
        return "file://" + _folder(text[len("file://") :].split("?", 1)[0], base or Path.cwd(), env)
    parts = urlsplit(text)
    scheme = parts.scheme.lower()
    if scheme in BUCKET_SCHEMES:
        query = parse_qs(parts.query)
        where = f"{scheme}://{parts.netloc}"
        prefix = key_prefix(unquote(parts.path), (query.get("prefix") or [""])[0])
        params: list[str] = []
        if prefix.endswith("/"):
            where += "/" + quote(prefix[:-1], safe=_PATH_SAFE)
        elif prefix:
            # Keys run on from a prefix with no slash (``p.pulumi/...``): no path spells that.
            params.append(f"prefix={quote(prefix, safe='/')}")
        endpoint = endpoint_of(query)
        if endpoint:
            params.append(f"endpoint={endpoint}")
        return where + ("?" + "&".join(params) if params else "")
    # Pulumi Cloud or a self-hosted service: scheme, host and path; never a user:password part.
    host = parts.hostname.lower() if parts.hostname else ""
    port = f":{parts.port}" if parts.port else ""
    return f"{scheme or 'https'}://{host}{port}{parts.path.rstrip('/')}"


_PATH_SAFE = "/:@!$&'()*+,;="
"""What a location's path keeps unquoted (RFC 3986's path characters), so an ordinary prefix reads as written."""

_PARSE_BOOL_TRUE = ("1", "t", "true")
"""Go's ``strconv.ParseBool`` true values (``1``, ``t``, ``T``, ``TRUE``, ``true``, ``True``), lowercased: how the
CLI reads ``disableSSL``."""

_INSECURE_FLAGS = ("disableSSL", "disable_https")
"""The legacy (AWS SDK v1) and current spellings of "this endpoint speaks http"; the CLI translates the first into
the second."""

_DEFAULT_PORTS = {"http": ":80", "https": ":443"}


def key_prefix(path: str, prefix_param: str) -> str:
    """The key prefix the CLI puts before ``.pulumi/``: gocloud.dev's ``prefix`` query parameter, then the URL's
    path without its leading slashes and with one trailing slash (pkg/backend/diy ``New``); ``""`` for none."""
    sub = path.lstrip("/")
    if sub and not sub.endswith("/"):
        sub += "/"
    return prefix_param + sub


def endpoint_of(query: dict[str, list[str]]) -> str:
    """A bucket URL's ``endpoint`` as a server: scheme, host and port, lowercased, default port dropped; ``""``
    for none. A bare one gets the scheme the CLI gives it: https, or http when ``disableSSL`` or ``disable_https``
    (its last value, as the CLI reads it) is true."""
    endpoint = (query.get("endpoint") or [""])[0].strip().rstrip("/").lower()
    if not endpoint:
        return ""
    if "://" not in endpoint:
        insecure = any((query.get(flag) or [""])[-1].lower() in _PARSE_BOOL_TRUE for flag in _INSECURE_FLAGS)
        endpoint = ("http://" if insecure else "https://") + endpoint
    scheme, rest = endpoint.split("://", 1)
    host, slash, path = rest.partition("/")
    host = host.rsplit("@", 1)[-1]
    default = _DEFAULT_PORTS.get(scheme)
    if default and host.endswith(default):
        host = host[: -len(default)]
    return f"{scheme}://{host}{slash}{path}".rstrip("/")


def _backend(url: str, source: str, base: Path, env: Mapping[str, str]) -> Backend:
    return Backend(url=url, source=source, location=canonical(url, base, env))


def _folder(path: str, base: Path, env: Mapping[str, str]) -> str:
    """A ``file://`` backend's folder as the CLI resolves it: ``~`` is the home folder, a relative path is taken
    from ``base``; symlinks resolved, so two spellings of one folder are one backend."""
    if path == "~" or path.startswith("~/"):
        home = env.get("HOME") or os.path.expanduser("~")
        path = home + path[1:]
    folder = Path(path) if os.path.isabs(path) else base / path
    return os.path.realpath(folder)


def _project_file(start: Path) -> Path | None:
    """The project file the CLI would use from ``start``: the nearest one in it or a folder above."""
    for folder in (start, *start.parents):
        for name in PROJECT_FILES:
            candidate = folder / name
            if candidate.is_file():
                return candidate
    return None


def _project_backend(project: Path) -> str | None:
    """``backend.url`` of a project file, or None (none set, or the file cannot be read: the CLI would refuse it
    before any provider runs)."""
    import yaml  # the Pulumi SDK's own dependency

    try:
        text = project.read_text()
        data = json.loads(text) if project.suffix == ".json" else yaml.safe_load(text)
    except (OSError, ValueError, yaml.YAMLError):
        return None
    backend = data.get("backend") if isinstance(data, dict) else None
    url = backend.get("url") if isinstance(backend, dict) else None
    return url.strip() if isinstance(url, str) and url.strip() else None


def _current_login(credentials: Path) -> str | None:
    try:
        data = json.loads(credentials.read_text())
    except (OSError, ValueError):
        return None
    current = data.get("current") if isinstance(data, dict) else None
    return current.strip() if isinstance(current, str) and current.strip() else None
