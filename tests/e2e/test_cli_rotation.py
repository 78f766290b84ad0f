"""A key rotation and a base-URL change on a deployed stack, through the real Pulumi CLI (docs/configuration.md).

The engine records the whole stack config with the stack's default `pulumi-python` provider, and `pulumi
refresh` and `pulumi destroy` (and the refresh that the examples' `refresh: always` runs before preview and up)
configure the provider from that copy, not from the stack config of now. So after `pulumi config set --secret
together:apiKey NEW` with the old key revoked, or a new together:baseUrl with the old endpoint gone, each of
them fails until `pulumi refresh --run-program` records the new value. A key in TOGETHER_API_KEY is never
recorded, and a rotation whose old key still works is recorded by the next `pulumi up`. Each test judges by what
the emulator holds (nothing written, nothing replaced, everything stopped at the end) and what the state records.
"""

from __future__ import annotations

import json
import re
import socket
import threading
from typing import Any
from urllib.parse import urlsplit

from harness.cli import ROOT, CLIStack, Result, active, writes

SWEEP = ROOT / "examples" / "sweep"
CONFIG = {"sessions": 1, "loraRanks": [8]}
PROVIDER = "pulumi:providers:pulumi-python"
SECRET_SIG = "4dabf18193072939515e22adb298388d"
OLD_KEY = "tk-revoked-at-rotation-" + "7d41c0a9e6b25f38" * 2
NEW_KEY = "tk-issued-at-rotation-" + "b58e2f07c3d196a4" * 2
# What the user runs: the commands a rotation locks, and the one that unlocks them.
LOCKED = (("preview",), ("up", "--yes", "--skip-preview"), ("refresh", "--yes"), ("destroy", "--yes"))
UNLOCK = ("refresh", "--yes", "--run-program")
RECORDED = (
    "Refresh and destroy (and the refresh that `refresh: always` runs first) use the {what} recorded with the "
    "stack's provider at its last deployment, not the current stack config"
)
KEY_TODO = (
    RECORDED.format(what="key") + ": with a valid key in together:apiKey (set it first if it is wrong), run "
    "`pulumi refresh --run-program` to record it, then run the command again."
)
KEY_SENTENCE = (
    "reading {kind} ({id}): the API rejected the key (HTTP 401: Invalid API key provided.). " + KEY_TODO
)
URL_TODO = (
    RECORDED.format(what="base URL") + ": if together:baseUrl has changed since, run `pulumi refresh "
    "--run-program` to record the new one, then run the command again; if not, check that URL and the network."
)


class Forwarder:
    """A TCP forwarder from a free loopback port to the emulator: the same API through another endpoint, as a
    user's new (or old) base URL is. :meth:`stop` takes the endpoint away: connections to it are refused."""

    def __init__(self, target_url: str) -> None:
        target = urlsplit(target_url)
        self._target = (target.hostname, target.port)
        self._listener = socket.create_server(("127.0.0.1", 0))
        self._listener.settimeout(0.2)  # accept() wakes up to see a stop (closing it would not wake it)
        self.url = f"http://127.0.0.1:{self._listener.getsockname()[1]}"
        self.host = urlsplit(self.url).netloc
        self._stopped = threading.Event()
        self._lock = threading.Lock()
        self._open: list[socket.socket] = []
        self._thread = threading.Thread(target=self._accept, name="forwarder", daemon=True)
        self._thread.start()

    def __enter__(self) -> Forwarder:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _accept(self) -> None:
        while not self._stopped.is_set():
            try:
                client, _ = self._listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            try:
                upstream = socket.create_connection(self._target)
            except OSError:
                client.close()
                continue
            with self._lock:
                self._open += [client, upstream]
            for src, dst in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(src, dst), daemon=True).start()

    @staticmethod
    def _pump(src: socket.socket, dst: socket.socket) -> None:
        try:
            while data := src.recv(65536):
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for sock in (src, dst):
                try:
                    sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def stop(self) -> None:
        self._stopped.set()
        self._thread.join(timeout=5)
        self._listener.close()
        # Kept-alive connections too: the endpoint is gone, not just closed to new ones.
        with self._lock:
            for sock in self._open:
                try:
                    sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
                sock.close()
            self._open.clear()


def reveal(value: Any) -> Any:
    """A value of `pulumi stack export --show-secrets`: a secret's plaintext, anything else as it is."""
    if isinstance(value, dict) and SECRET_SIG in value:
        return json.loads(value["plaintext"]) if "plaintext" in value else value
    return value


def recorded_config(stack: CLIStack, *, show_secrets: bool = True) -> dict[str, Any]:
    """The inputs of the stack's default pulumi-python provider: the stack config it records."""
    args = ("stack", "export", *(["--show-secrets"] if show_secrets else []))
    deployment = json.loads(stack.run(*args).stdout)["deployment"]
    providers = [r for r in deployment["resources"] if r["type"] == PROVIDER]
    assert [p["urn"].rsplit("::", 1)[1] for p in providers] == ["default"], providers
    return {key: reveal(value) for key, value in providers[0]["inputs"].items()}


def deployed(stack: CLIStack) -> dict[str, str]:
    """{name: id} of the stack's model resource and session in the state."""
    return {name: entry["id"] for name, entry in stack.resources().items()}


def assert_locked(result: Result, ids: dict[str, str], sentence: str) -> None:
    """``result`` failed, and for each object with the one sentence ``sentence`` (``{kind}``, ``{id}``)."""
    assert result.returncode != 0, result
    for kind, name in (("model resource", "sweep-gpu"), ("training session", "trial-0")):
        pattern = re.escape(sentence).replace(re.escape("{kind}"), kind).replace(re.escape("{id}"), ids[name])
        pattern = pattern.replace(re.escape("{any}"), r"[^\n]*")
        assert re.search(rf"error: (?:Preview failed: )?{pattern}\n", result.output), (kind, str(result))
    # Never the command they just ran, never the provider's traceback.
    assert "pulumi config set" not in result.output and "Traceback" not in result.output, result


def assert_unlocked(stack: CLIStack, emulator: Any, ids: dict[str, str]) -> list[Result]:
    """After the documented step: up changes and replaces nothing, refresh works, destroy stops everything."""
    seen = [stack.preview("--expect-no-changes")]
    writes(emulator)
    seen.append(stack.up())
    assert writes(emulator) == []  # no create, no PATCH, no stop: nothing replaced or changed
    assert deployed(stack) == ids
    seen.append(stack.run("refresh", "--yes"))
    assert deployed(stack) == ids
    still = active(emulator)
    assert [o["id"] for o in still["model_resources"]] == [ids["sweep-gpu"]]
    assert [o["id"] for o in still["training_sessions"]] == [ids["trial-0"]]
    seen.append(stack.run("destroy", "--yes"))
    assert active(emulator) == {"model_resources": [], "training_sessions": []}
    assert deployed(stack) == {}
    return seen


def test_a_rotated_key_locks_every_command_with_one_sentence_until_refresh_run_program(cli_stack, emulator):
    emulator.control.configure(api_key=OLD_KEY)
    try:
        stack = cli_stack(SWEEP).init(CONFIG, api_key=OLD_KEY)
        seen = [stack.up()]
        ids = deployed(stack)
        assert sorted(ids) == ["sweep-gpu", "trial-0"]
        # The key is in the state: in the default provider's inputs, encrypted by the stack's secrets provider.
        assert recorded_config(stack)["together:apiKey"] == OLD_KEY
        encrypted = recorded_config(stack, show_secrets=False)["together:apiKey"]
        assert set(encrypted) == {SECRET_SIG, "ciphertext"}, encrypted

        # The rotation: a new key is issued, the old one revoked, the stack config given the new one.
        emulator.control.configure(api_key=NEW_KEY)
        stack.run("config", "set", "--secret", "together:apiKey", NEW_KEY)
        writes(emulator)
        for args in LOCKED:
            result = stack.run(*args, check=False)
            seen.append(result)
            assert_locked(result, ids, KEY_SENTENCE)
        assert writes(emulator) == []
        assert len(active(emulator)["model_resources"]) == 1 and deployed(stack) == ids
        assert recorded_config(stack)["together:apiKey"] == OLD_KEY  # none of them recorded the new key

        seen.append(stack.run(*UNLOCK))
        assert recorded_config(stack)["together:apiKey"] == NEW_KEY
        assert writes(emulator) == []  # a refresh only reads
        seen += assert_unlocked(stack, emulator, ids)

        for result in seen:
            assert OLD_KEY not in result.output and NEW_KEY not in result.output, result.args
        for path in (stack.tmp / "pulumi-home").rglob("*"):
            if path.is_file() and path.stat().st_size < 50_000_000:
                data = path.read_bytes()
                assert OLD_KEY.encode() not in data and NEW_KEY.encode() not in data, path
    finally:
        emulator.control.configure(api_key=None)  # any key again, for the fixture's cleanup destroy


def test_a_new_base_url_with_the_old_endpoint_gone_locks_every_command_until_refresh_run_program(
    cli_stack, emulator
):
    with Forwarder(emulator.base_url) as old_endpoint, Forwarder(emulator.base_url) as new_endpoint:
        stack = cli_stack(SWEEP).init(CONFIG)
        stack.set("together:baseUrl", old_endpoint.url)
        stack.up()
        ids = deployed(stack)
        assert recorded_config(stack)["together:baseUrl"] == old_endpoint.url

        # The same API moves to a new endpoint; the old one goes away.
        stack.set("together:baseUrl", new_endpoint.url)
        old_endpoint.stop()
        writes(emulator)
        for args in LOCKED:
            result = stack.run(*args, check=False)
            cause = f"the API at {old_endpoint.host} could not be reached ({{any}}). "
            assert_locked(result, ids, "reading {kind} ({id}): " + cause + URL_TODO)
            assert "could not connect" in result.output, result
        assert writes(emulator) == [] and deployed(stack) == ids
        assert len(active(emulator)["training_sessions"]) == 1

        stack.run(*UNLOCK)
        assert recorded_config(stack)["together:baseUrl"] == new_endpoint.url
        assert writes(emulator) == []
        assert_unlocked(stack, emulator, ids)


def test_a_key_from_the_environment_rotates_with_no_step(cli_stack, emulator):
    # TOGETHER_API_KEY is read by the provider process at each command: no copy of it is recorded.
    emulator.control.configure(api_key=OLD_KEY)
    try:
        stack = cli_stack(SWEEP, TOGETHER_API_KEY=OLD_KEY).init(CONFIG)
        stack.run("config", "rm", "together:apiKey")
        stack.up()
        ids = deployed(stack)
        assert "together:apiKey" not in recorded_config(stack)

        emulator.control.configure(api_key=NEW_KEY)
        stack.env["TOGETHER_API_KEY"] = NEW_KEY
        assert_unlocked(stack, emulator, ids)
    finally:
        emulator.control.configure(api_key=None)


def test_a_rotation_while_the_old_key_still_works_is_recorded_by_the_next_up(cli_stack, emulator):
    # The overlap of a rotation (old and new key both valid) is the emulator accepting any key: the old one
    # keeps the refresh before `up` working, the program's steps use the new one, and the `up` records it.
    stack = cli_stack(SWEEP).init(CONFIG, api_key=OLD_KEY)
    stack.up()
    ids = deployed(stack)
    stack.run("config", "set", "--secret", "together:apiKey", NEW_KEY)
    writes(emulator)

    seen = [stack.up()]
    assert writes(emulator) == [] and deployed(stack) == ids
    assert recorded_config(stack)["together:apiKey"] == NEW_KEY

    emulator.control.configure(api_key=NEW_KEY)  # the old key revoked only now
    try:
        seen += assert_unlocked(stack, emulator, ids)
    finally:
        emulator.control.configure(api_key=None)
    for result in seen:
        assert OLD_KEY not in result.output and NEW_KEY not in result.output, result.args
