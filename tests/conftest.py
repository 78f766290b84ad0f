"""Fixtures shared by every layer of the suite.

`emulator` gives each test a freshly reset Together RL emulator on a loopback port, with TOGETHER_BASE_URL and
TOGETHER_API_KEY pointing at it, so the client, the provider and the official SDK all talk to the same place.
`pulumi_bin` is the folder of the real Pulumi CLI (`harness.cli.provide`): without one a test that needs it is
skipped with the reason, or fails where TOGETHER_RL_REQUIRE_CLI=1 (CI). `bucket` is a fresh bucket of an
S3-compatible server on loopback (`s3_server`, one per worker: `harness.bucket`); `gcs_bucket` one of a Google Cloud
Storage server (`gcs_server`: fake-gcs-server, `harness.gcs`) and `azure_container` a container of an Azure Blob
server (`azurite_server`: Azurite, `harness.azurite`), each failing, never skipping, where its server cannot be had.
"""

from __future__ import annotations

import atexit
import dataclasses
import os
import shutil
import tempfile
from pathlib import Path

import pytest
from harness.cli import provide, provide_yaml_host, unavailable
from harness.engine import sigint_as_the_engine_leaves_it

ROOT = Path(__file__).resolve().parent.parent

TEST_API_KEY = "tk-test-0123456789abcdef-secret"

# The create journal (pulumi_together_rl.journal) never touches the user's own state folder from a test run:
# provider processes started by the suite get this folder; each in-process test gets its own (below).
# The stack backend (pulumi_together_rl.backend) is found as the CLI finds it; an in-process test has no backend
# of its own, so it must not read the user's `pulumi login` either: an empty PULUMI_HOME makes it Pulumi Cloud's
# default. Tests of other backends set PULUMI_BACKEND_URL or PULUMI_HOME themselves. Both folders go with the run.
_RUN_FOLDER = tempfile.mkdtemp(prefix="together-rl-test-")
atexit.register(shutil.rmtree, _RUN_FOLDER, ignore_errors=True)
os.environ["TOGETHER_RL_STATE_DIR"] = os.path.join(_RUN_FOLDER, "state")
os.environ.pop("PULUMI_BACKEND_URL", None)
os.environ["PULUMI_HOME"] = os.path.join(_RUN_FOLDER, "pulumi-home")


def pytest_configure(config):
    sigint_as_the_engine_leaves_it()  # the suite's signals reach its providers wherever it was started from


@pytest.fixture(autouse=True)
def _own_journal(tmp_path_factory, monkeypatch):
    monkeypatch.setenv("TOGETHER_RL_STATE_DIR", str(tmp_path_factory.mktemp("state")))


# Transitions happen at once unless a test sets timings: tests drive time explicitly (clock/advance).
FAST_TIMINGS = {
    "resource_pending": 0.0,
    "resource_creating": 0.0,
    "resource_stopping": 0.0,
    "session_creating": 0.0,
    "session_stopping": 0.0,
}


@dataclasses.dataclass
class Emulator:
    base_url: str
    api_key: str
    control: object  # pulumi_together_rl.emulator.control.EmulatorControl


@pytest.fixture(scope="session")
def emulator_server():
    from pulumi_together_rl.emulator.server import EmulatorServer

    with EmulatorServer(timings=FAST_TIMINGS) as server:
        yield server


@pytest.fixture
def emulator(emulator_server, monkeypatch):
    from pulumi_together_rl.emulator.control import EmulatorControl

    control = EmulatorControl(emulator_server.base_url)
    control.reset()
    monkeypatch.setenv("TOGETHER_BASE_URL", emulator_server.base_url)
    monkeypatch.setenv("TOGETHER_API_KEY", TEST_API_KEY)
    yield Emulator(base_url=emulator_server.base_url, api_key=TEST_API_KEY, control=control)
    control.close()


def _tool(found: str | None, reason: str) -> str:
    """A tool the CLI tests need: its folder, else :func:`harness.cli.unavailable`."""
    return found or unavailable(reason)


@pytest.fixture(scope="session")
def s3_server():
    """An S3-compatible server (moto) on a loopback port, one per pytest-xdist worker (:mod:`harness.bucket`)."""
    from harness.bucket import S3Server

    with S3Server() as server:
        yield server


@pytest.fixture
def bucket(s3_server, monkeypatch):
    """A fresh, empty bucket of :func:`s3_server` for this test (:class:`harness.bucket.Bucket`), with the
    credentials and region it takes in this process's environment (for in-process stores)."""
    made = s3_server.bucket()
    for key, value in made.env.items():
        monkeypatch.setenv(key, value)
    return made


def _server(kind):
    """A server of :mod:`harness.loopback_server`, started; one it cannot provide or start fails the test with the
    reason (never a skip: the store tests hold each store to a real server)."""
    from harness.loopback_server import ServerUnavailable

    server = None
    try:
        server = kind()
        server.start()
        return server
    except ServerUnavailable as exc:
        why = str(exc)
        if server is not None:
            server.close()
    pytest.fail(why, pytrace=False)  # outside the except: the reason alone, not the exception it replaces


@pytest.fixture(scope="session")
def gcs_server():
    """A Google Cloud Storage server (fake-gcs-server, built by scripts/fake-gcs-server.sh) on a loopback port, one
    per pytest-xdist worker (:mod:`harness.gcs`)."""
    from harness.gcs import GCSServer

    server = _server(GCSServer)
    yield server
    server.close()


@pytest.fixture
def gcs_bucket(gcs_server, monkeypatch):
    """A fresh, empty bucket of :func:`gcs_server` for this test (:class:`harness.gcs.GCSBucket`), with
    ``STORAGE_EMULATOR_HOST`` in this process's environment (for in-process stores)."""
    made = gcs_server.bucket()
    for key, value in made.env.items():
        monkeypatch.setenv(key, value)
    return made


@pytest.fixture(scope="session")
def azurite_server():
    """An Azure Blob server (Azurite, installed by scripts/azurite.sh) on a loopback port, one per pytest-xdist
    worker (:mod:`harness.azurite`)."""
    from harness.azurite import AzuriteServer

    server = _server(AzuriteServer)
    yield server
    server.close()


@pytest.fixture
def azure_container(azurite_server, monkeypatch):
    """A fresh, empty container of :func:`azurite_server` for this test (:class:`harness.azurite.AzureContainer`),
    with the account, key and service URL gocloud.dev reads in this process's environment (for in-process stores)."""
    made = azurite_server.container()
    for key, value in made.env.items():
        monkeypatch.setenv(key, value)
    return made


@pytest.fixture(scope="session")
def pulumi_bin() -> str:
    return _tool(*provide())


@pytest.fixture(scope="session")
def yaml_bin() -> str:
    """The folder of the Pulumi YAML language host (the plugin face's programs), like :func:`pulumi_bin`."""
    return _tool(*provide_yaml_host())


# ----------------------------------------------------------------------------------------------- the tiers
# A test belongs to one tier (docs/development.md):
#   check   (no marker)  everything that needs neither the Pulumi CLI nor a release build: the inner loop;
#   cli     (marker cli) what only the real CLI shows; marked here, from the fixtures that provide the CLI;
#   release (marker release, set by the test file) upgrades from past releases, generated SDKs, built wheels
#           and archives, the fault campaign: release-grade checks, which may use the CLI too.
CLI_FIXTURES = {"cli_stack", "pulumi_bin", "yaml_bin"}


# `make test` runs every tier's tests in one pool of workers (scripts/tiers.sh): the suite is CPU-bound on two cores,
# and three pools in turn left a core idle at each one's end while its last long test ran. So the order of a run
# is by what each test costs: the long release tests that need nothing built ahead start first, the CLI scenarios
# next, then the release tests that use what scripts/tiers.sh builds ahead in the background (the SDK generators
# and builds, the store servers: on a fresh machine that takes minutes), and the check tier's many short tests
# last, which fill the workers as the long ones end. `make test` has pytest-xdist hand the tests out one at a time
# as workers come free (scripts/tiers.sh), so the long ones run side by side first.
# Within a rank the files keep their order.
AFTER_BUILDS = {"test_generated_sdks.py", "test_bucket_store.py"}


def run_order(item: pytest.Item) -> int:
    if item.get_closest_marker("release"):
        return 2 if item.path.name in AFTER_BUILDS else 0
    return 1 if item.get_closest_marker("cli") else 3


def pytest_collection_modifyitems(items):
    for item in items:
        if CLI_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.cli)
    items.sort(key=run_order)


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session, exitstatus):
    """In CI (TOGETHER_RL_REQUIRE_CLI=1) every test must run: a skipped one fails the run."""
    if os.environ.get("TOGETHER_RL_REQUIRE_CLI") != "1":
        return
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    skipped = reporter.stats.get("skipped", []) if reporter else []
    if skipped:
        print(f"\n{len(skipped)} test(s) skipped with TOGETHER_RL_REQUIRE_CLI=1: failing the run")
        session.exitstatus = 1
