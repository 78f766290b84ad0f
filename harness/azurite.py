"""An Azure Blob Storage server on loopback: Azurite's Blob service (``scripts/azurite.sh``: the pinned npm package,
installed once into the per-user cache), in memory, plain HTTP, its telemetry off (Azurite reports usage to Azure
unless told not to, and a test run sends nothing off this machine).

:class:`AzuriteServer` is one server process (the suite starts one per pytest-xdist worker);
:meth:`AzuriteServer.container` makes a fresh :class:`AzureContainer` (one per test), whose
:attr:`AzureContainer.url` is the ``azblob://`` URL the journal takes and whose :attr:`AzureContainer.env` is what a
process needs to reach it, as gocloud.dev (the Pulumi CLI) reads it: the account and its shared key
(``AZURE_STORAGE_ACCOUNT``, ``AZURE_STORAGE_KEY``) and the service URL's parts (``AZURE_STORAGE_DOMAIN``,
``AZURE_STORAGE_PROTOCOL``, ``AZURE_STORAGE_IS_LOCAL_EMULATOR``). The account is Azurite's built-in development
account, whose key Microsoft publishes with Azurite: no secret.
"""

from __future__ import annotations

import base64
import dataclasses
import email.utils
import hashlib
import hmac
import shutil
import tempfile
import uuid

import httpx

from .loopback_server import LoopbackServer, ServerUnavailable, provide

ACCOUNT = "devstoreaccount1"
ACCOUNT_KEY = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
"""Azurite's development account and its published key (the same in every Azurite)."""
API_VERSION = "2021-08-06"
"""The Blob service version the harness's own requests name (x-ms-version)."""


@dataclasses.dataclass(frozen=True)
class AzureContainer:
    """One container of the server, and how a process reaches it."""

    name: str
    endpoint: str
    """``127.0.0.1:<port>``: gocloud.dev's storage domain for the local emulator."""
    prefix: str = "state"

    @property
    def url(self) -> str:
        """The ``azblob://`` URL of the container's prefix (the server is named by :attr:`env`)."""
        return f"azblob://{self.name}/{self.prefix}"

    def store_url(self, prefix: str) -> str:
        """A URL of the same container under another prefix (a store of its own, for the store tests)."""
        return dataclasses.replace(self, prefix=prefix).url

    @property
    def env(self) -> dict[str, str]:
        """What gocloud.dev and the journal's store need to reach the server: the account, its key, the service
        URL's domain and protocol, and that it is the local emulator (``http://<domain>/<account>``)."""
        return {
            "AZURE_STORAGE_ACCOUNT": ACCOUNT,
            "AZURE_STORAGE_KEY": ACCOUNT_KEY,
            "AZURE_STORAGE_DOMAIN": self.endpoint,
            "AZURE_STORAGE_PROTOCOL": "http",
            "AZURE_STORAGE_IS_LOCAL_EMULATOR": "true",
        }


def signed(method: str, url_path: str, endpoint: str, query: dict[str, str] | None = None) -> httpx.Response:
    """A request of no body to the Blob service, signed with the account's shared key (the SharedKey scheme;
    Azurite, like Azure, refuses an unsigned write): for the harness's own container operations."""
    headers = {"x-ms-date": email.utils.formatdate(usegmt=True), "x-ms-version": API_VERSION}
    query = query or {}
    canonical_headers = "".join(f"{name}:{value}\n" for name, value in sorted(headers.items()))
    # The emulator's URLs carry the account in the path, so it appears twice in the canonical resource.
    resource = f"/{ACCOUNT}/{ACCOUNT}{url_path}" + "".join(
        f"\n{k.lower()}:{v}" for k, v in sorted(query.items())
    )
    # VERB, then the eleven standard headers (all empty here: no body, no conditions), then the x-ms ones.
    to_sign = "\n".join([method, *[""] * 11]) + "\n" + canonical_headers + resource
    digest = hmac.new(base64.b64decode(ACCOUNT_KEY), to_sign.encode(), hashlib.sha256).digest()
    headers["Authorization"] = f"SharedKey {ACCOUNT}:{base64.b64encode(digest).decode()}"
    return httpx.request(
        method, f"http://{endpoint}/{ACCOUNT}{url_path}", params=query, headers=headers, timeout=10
    )


class AzuriteServer(LoopbackServer):
    """Azurite's Blob service on a loopback port, its blobs in memory (see the module docstring)."""

    name = "the Azure Blob server (Azurite)"

    def __init__(self) -> None:
        super().__init__()
        self.entry = provide("azurite.sh")
        self.node = shutil.which("node")
        if self.node is None:
            raise ServerUnavailable("Azurite needs node, and node is not on PATH")
        # Azurite keeps nothing on disk with --inMemoryPersistence; its working folder is still a fresh one.
        self._folder = tempfile.TemporaryDirectory(prefix="azurite-")
        self.cwd = self._folder.name

    def command(self) -> list[str]:
        assert self.node is not None
        return [
            self.node,
            self.entry,
            "--blobHost",
            "127.0.0.1",
            "--blobPort",
            str(self.port),
            "--inMemoryPersistence",
            "--disableTelemetry",
            "--silent",
        ]

    def answers(self) -> bool:
        # Any answer will do: an unsigned request is refused (403), and that is an answer.
        httpx.get(f"http://{self.endpoint}/{ACCOUNT}", params={"comp": "list"}, timeout=2)
        return True

    def container(self, name: str | None = None) -> AzureContainer:
        """A fresh, empty container (Create Container); its name is unique unless given."""
        made = AzureContainer(name or f"t-{uuid.uuid4().hex[:16]}", self.endpoint)
        answer = signed("PUT", f"/{made.name}", self.endpoint, {"restype": "container"})
        if answer.status_code != 201:
            raise RuntimeError(
                f"creating container {made.name} on {self.endpoint}: {answer.status_code} {answer.text}"
            )
        return made

    def close(self) -> None:
        super().close()
        self._folder.cleanup()

    def __enter__(self) -> AzuriteServer:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
