"""A Google Cloud Storage server on loopback: fake-gcs-server (``scripts/fake-gcs-server.sh``: the pinned Go module,
built once into the per-user cache), in memory, plain HTTP.

:class:`GCSServer` is one server process (the suite starts one per pytest-xdist worker); :meth:`GCSServer.bucket`
makes a fresh :class:`GCSBucket` (one per test), whose :attr:`GCSBucket.url` is the ``gs://`` URL the journal takes
and whose :attr:`GCSBucket.env` is what a process needs to reach it: ``STORAGE_EMULATOR_HOST``, which gocloud.dev
(the Pulumi CLI), Google's SDKs and the journal's bucket store all honour, with no credentials.

What it speaks: the JSON API (``/storage/v1``, ``/upload/storage/v1``, with ``ifGenerationMatch``), which gocloud.dev
and Google's SDKs use; of the XML API only reads and listing. An object PUT of the XML API, which obstore writes
with (``PUT /<bucket>/<object>`` with ``x-goog-if-generation-match``), is answered ``400 invalid uploadType``
unless it is a signed URL, and a signed one is written without its preconditions: the store tests say so
(``tests/unit/test_bucket_store.py``).
"""

from __future__ import annotations

import dataclasses
import uuid
from urllib.parse import quote

import httpx

from .loopback_server import LoopbackServer, provide


@dataclasses.dataclass(frozen=True)
class GCSBucket:
    """One bucket of the server, and how a process reaches it."""

    name: str
    endpoint: str
    """``127.0.0.1:<port>``: the form ``STORAGE_EMULATOR_HOST`` takes."""
    prefix: str = "state"

    @property
    def url(self) -> str:
        """The ``gs://`` URL of the bucket's prefix (the server is named by :attr:`env`, as gocloud.dev takes it)."""
        return f"gs://{self.name}/{self.prefix}"

    def store_url(self, prefix: str) -> str:
        """A URL of the same bucket under another prefix (a store of its own, for the store tests)."""
        return dataclasses.replace(self, prefix=prefix).url

    @property
    def env(self) -> dict[str, str]:
        """What gocloud.dev and the journal's store need to reach the server: its address, and no credentials."""
        return {"STORAGE_EMULATOR_HOST": self.endpoint}

    def write(self, key: str, data: bytes, if_generation_match: int | None = None) -> int | None:
        """Write ``data`` at ``key`` of the bucket's prefix through the JSON API (a media upload, as gocloud.dev
        writes): its generation, or None when ``if_generation_match`` was not met (412)."""
        params: dict[str, str] = {"uploadType": "media", "name": f"{self.prefix}/{key}"}
        if if_generation_match is not None:
            params["ifGenerationMatch"] = str(if_generation_match)
        answer = httpx.post(
            f"http://{self.endpoint}/upload/storage/v1/b/{self.name}/o",
            params=params,
            content=data,
            timeout=10,
        )
        if answer.status_code == 412:
            return None
        answer.raise_for_status()
        return int(answer.json()["generation"])

    def generation(self, key: str) -> int | None:
        """The generation of the object at ``key`` of the bucket's prefix (JSON API metadata), None: no object."""
        name = quote(f"{self.prefix}/{key}", safe="")
        answer = httpx.get(f"http://{self.endpoint}/storage/v1/b/{self.name}/o/{name}", timeout=10)
        if answer.status_code == 404:
            return None
        answer.raise_for_status()
        return int(answer.json()["generation"])


class GCSServer(LoopbackServer):
    """fake-gcs-server on a loopback port, its objects in memory (see the module docstring)."""

    name = "the GCS server (fake-gcs-server)"

    def __init__(self) -> None:
        super().__init__()
        self.binary = provide("fake-gcs-server.sh")

    def command(self) -> list[str]:
        return [
            self.binary,
            "-backend",
            "memory",
            "-scheme",
            "http",
            "-host",
            "127.0.0.1",
            "-port",
            str(self.port),
            # The XML API's routes answer requests to this host only (its default is storage.googleapis.com).
            "-public-host",
            self.endpoint,
            "-external-url",
            f"http://{self.endpoint}",
            "-log-level",
            "warn",
        ]

    def answers(self) -> bool:
        return httpx.get(f"http://{self.endpoint}/_internal/healthcheck", timeout=2).status_code == 200

    def bucket(self, name: str | None = None) -> GCSBucket:
        """A fresh, empty bucket (JSON API buckets.insert); its name is unique unless given."""
        made = GCSBucket(name or f"t-{uuid.uuid4().hex[:16]}", self.endpoint)
        answer = httpx.post(f"http://{self.endpoint}/storage/v1/b", json={"name": made.name}, timeout=10)
        if answer.status_code != 200:
            raise RuntimeError(
                f"creating bucket {made.name} on {self.endpoint}: {answer.status_code} {answer.text}"
            )
        return made

    def __enter__(self) -> GCSServer:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
