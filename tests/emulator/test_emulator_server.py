"""EmulatorServer (thread), the fallback connection drop, the state machine used directly, and the CLI."""

from __future__ import annotations

import concurrent.futures
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from datetime import datetime, timedelta, timezone

import httpx
import pytest
import uvicorn

from pulumi_together_rl.emulator.app import EmulatorApp
from pulumi_together_rl.emulator.control import EmulatorControl
from pulumi_together_rl.emulator.errors import CapReached, InvalidRequest
from pulumi_together_rl.emulator.server import EmulatorServer, bind_socket
from pulumi_together_rl.emulator.state import EmulatorState

ZERO = {
    k: 0
    for k in (
        "resource_pending",
        "resource_creating",
        "resource_stopping",
        "session_creating",
        "session_stopping",
    )
}

# ---------------------------------------------------------------------------------------------- server


def test_server_binds_an_ephemeral_port_and_stops_cleanly():
    server = EmulatorServer(api_key="k1", conflict_status=400)
    with server:
        assert server.base_url == f"http://127.0.0.1:{server.port}"
        assert server.port > 0
        with httpx.Client(base_url=server.base_url) as http:
            assert (
                http.get("/v1/rl/supported-models", headers={"Authorization": "Bearer k1"}).status_code == 200
            )
            assert (
                http.get("/v1/rl/supported-models", headers={"Authorization": "Bearer k2"}).status_code == 401
            )
        control = EmulatorControl(server.base_url + "/v1/")  # a trailing /v1 is tolerated
        control.configure(conflict_status=409)
        control.reset()  # constructor settings are what reset restores
        assert control.settings()["conflict_status"] == 400
        control.close()
        port = server.port
    with pytest.raises(httpx.ConnectError):
        httpx.get(f"http://127.0.0.1:{port}/_emulator/settings", timeout=2)


def test_every_answer_has_one_date_header_on_the_emulators_clock(emulator):
    """What a client measures its clock against: one Date header per answer (errors too), from the emulator's
    clock that a test moves, not the real one that the ASGI server would stamp."""
    import email.utils

    emulator.control.advance(3600)
    with httpx.Client(base_url=emulator.base_url) as http:
        ok = http.get("/v1/rl/supported-models", headers={"Authorization": f"Bearer {emulator.api_key}"})
        refused = http.get(
            "/v1/rl/model-resources/nope", headers={"Authorization": f"Bearer {emulator.api_key}"}
        )

    for answer in (ok, refused):
        (date,) = answer.headers.get_list("date")
        shown = email.utils.parsedate_to_datetime(date)
        expected = emulator.control.now()
        assert expected - timedelta(seconds=5) <= shown <= expected, (date, expected)
    assert refused.status_code == 404


def test_base_url_and_port_survive_stop_and_raise_clearly_before_start():
    server = EmulatorServer()
    for attr in ("base_url", "port"):
        with pytest.raises(RuntimeError, match="never started"):
            getattr(server, attr)
    assert repr(server) == "EmulatorServer(stopped)"
    with server:
        url, port = server.base_url, server.port
        assert repr(server) == f"EmulatorServer({url})"
    # After stop: the address it had (no OSError from a closed socket), and nothing listens there any more.
    assert server.base_url == url
    assert server.port == port
    assert repr(server) == "EmulatorServer(stopped)"
    with pytest.raises(httpx.ConnectError):
        httpx.get(f"{url}/_emulator/settings", timeout=2)
    server.stop()  # a second stop is harmless
    assert server.base_url == url


def test_server_refuses_invalid_start_settings():
    with pytest.raises(ValueError, match="timings"):
        EmulatorServer(timings={"resource_pending": -1})


def test_fallback_drop_without_a_transport_still_breaks_the_connection():
    """On a server whose `receive` hides the transport, the drop falls back to an unfinished body."""
    emulator = EmulatorApp(timings=ZERO)

    async def hide_transport(scope, receive, send):
        async def plain_receive():
            return await receive()

        await emulator(scope, plain_receive, send)

    sock = bind_socket("127.0.0.1", 0)
    server = uvicorn.Server(
        uvicorn.Config(hide_transport, lifespan="off", log_config=None, log_level="critical")
    )
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    try:
        while not server.started:
            time.sleep(0.01)
        emulator.faults.add({"path": "supported-models", "drop_connection": True})
        url = f"http://127.0.0.1:{sock.getsockname()[1]}/v1/rl/supported-models"
        with pytest.raises(httpx.RemoteProtocolError):
            httpx.get(url, headers={"Authorization": "Bearer k"}, timeout=5)
    finally:
        server.should_exit = True
        thread.join(5)
        sock.close()


# ----------------------------------------------------------------------------------------- state itself


class FakeWall:
    def __init__(self) -> None:
        self.now = datetime(2026, 1, 2, tzinfo=timezone.utc)

    def __call__(self) -> datetime:
        return self.now


def test_state_machine_is_deterministic_on_an_injected_clock():
    wall = FakeWall()
    state = EmulatorState({"timings": {**ZERO, "resource_pending": 5, "resource_creating": 5}}, wall=wall)
    spec = state.resolve_resource_spec(base_model="Qwen/Qwen3.5-4B", inactive_timeout=300)
    rid = state.create_model_resource(spec).id
    wall.now += timedelta(seconds=10)
    ready = state.get_model_resource(rid)
    assert ready.status == "MODEL_RESOURCES_STATUS_READY"
    assert ready.updated_at == datetime(2026, 1, 2, 0, 0, 10, tzinfo=timezone.utc)
    assert ready.expires_at == datetime(2026, 1, 2, 0, 5, 10, tzinfo=timezone.utc)
    state.advance_clock(300)
    assert state.get_model_resource(rid).status == "MODEL_RESOURCES_STATUS_STOPPED"


def test_state_enforces_the_cap_under_concurrent_threads():
    state = EmulatorState({"timings": ZERO})
    rid = state.create_model_resource(state.resolve_resource_spec(base_model="Qwen/Qwen3.5-4B")).id
    state.get_model_resource(rid)
    results: list[str] = []
    lock = threading.Lock()

    def create() -> None:
        try:
            state.create_training_session(model_resources_id=rid)
            outcome = "ok"
        except CapReached:
            outcome = "cap"
        with lock:
            results.append(outcome)

    threads = [threading.Thread(target=create) for _ in range(20)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(results) == ["cap"] * 15 + ["ok"] * 5


def test_state_validation_errors_are_value_errors_naming_the_field():
    state = EmulatorState()
    with pytest.raises(InvalidRequest) as err:
        state.resolve_resource_spec(base_model="Qwen/Qwen3.5-4B", inactive_timeout=10)
    assert isinstance(err.value, ValueError)
    assert err.value.param == "inactive_timeout"


# ---------------------------------------------------------------------------------------------------- CLI


def _cli(*args: str) -> subprocess.Popen:
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    return subprocess.Popen(
        [sys.executable, "-m", "pulumi_together_rl.emulator", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )


def test_cli_prints_the_base_url_first_serves_and_exits_cleanly_on_sigterm():
    proc = _cli(
        "--host",
        "127.0.0.1",
        "--port",
        "0",
        "--api-key",
        "cli-key",
        "--timings",
        "all=0",
        "--conflict-status",
        "400",
    )
    try:
        assert proc.stdout is not None
        first = proc.stdout.readline().strip()
        assert first.startswith("http://127.0.0.1:")
        port = int(first.rsplit(":", 1)[1])
        assert port > 0
        with httpx.Client(base_url=first, timeout=5) as http:
            assert (
                http.get("/v1/rl/model-resources", headers={"Authorization": "Bearer nope"}).status_code
                == 401
            )
            ok = http.post(
                "/v1/rl/model-resources",
                json={"base_model": "Qwen/Qwen3.5-4B"},
                headers={"Authorization": "Bearer cli-key"},
            )
            assert ok.status_code == 200
            settings = http.get("/_emulator/settings").json()
            assert settings["conflict_status"] == 400
            assert settings["timings"]["resource_pending"] == 0.0
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=10) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", port), timeout=1).close()


def _exposure_warning(host: str, port: int) -> str:
    return (
        f"warning: the emulator listens on {host} port {port}, not only on loopback: its control API "
        "(/_emulator) has no authentication, and anyone who can reach it can read the state and the request log, "
        "change the settings and add API keys. Listen on 127.0.0.1 unless others must reach it.\n"
    )


@pytest.mark.parametrize("host", ["0.0.0.0", "127.0.0.1", "localhost"])
def test_cli_warns_on_stderr_when_it_listens_beyond_loopback(host):
    proc = _cli("--host", host, "--port", "0")
    try:
        assert proc.stdout is not None and proc.stderr is not None
        url = proc.stdout.readline().strip()
        port = int(url.rsplit(":", 1)[1])
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=5) as http:
            assert http.get("/_emulator/settings").status_code == 200  # serving: its startup lines are out
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=10) == 0
        stderr = proc.stderr.read()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    if host == "0.0.0.0":
        assert stderr == _exposure_warning("0.0.0.0", port)
    else:
        assert "warning" not in stderr and stderr == ""


def test_server_in_a_thread_warns_too_when_it_listens_beyond_loopback(capsys):
    with EmulatorServer(host="0.0.0.0") as server:
        port = server.port
    assert capsys.readouterr().err == _exposure_warning("0.0.0.0", port)
    with EmulatorServer():
        pass
    assert capsys.readouterr().err == ""


_SIGTERM_AT_FIRST_LINE = """
import os, signal, sys
from pulumi_together_rl.emulator import __main__ as cli

def print_then_sigterm(*args, **kwargs):
    print(*args, **kwargs)
    os.kill(os.getpid(), signal.SIGTERM)  # the supervisor's SIGTERM, at the worst possible instant

cli.print = print_then_sigterm  # module global: shadows the builtin inside main()
sys.exit(cli.main(["--port", "0"]))
"""


def test_cli_sigterm_the_instant_the_url_is_printed_exits_cleanly():
    """Deterministic: the signal lands right after the URL is written, before the server runs."""
    result = subprocess.run(
        [sys.executable, "-c", _SIGTERM_AT_FIRST_LINE], capture_output=True, text=True, timeout=30
    )
    assert result.returncode == 0, (result.returncode, result.stderr[-500:])
    assert result.stdout.startswith("http://127.0.0.1:")


def test_cli_supervisor_reading_the_first_line_then_sending_sigterm_always_sees_exit_0():
    """The real pattern, 10 times (in parallel threads, each signalling the moment its line arrives)."""

    def launch_and_terminate() -> int:
        proc = subprocess.Popen(
            [sys.executable, "-m", "pulumi_together_rl.emulator", "--port", "0"],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
        )
        try:
            assert proc.stdout is not None
            assert proc.stdout.readline().startswith(b"http://127.0.0.1:")
            proc.send_signal(signal.SIGTERM)
            return proc.wait(timeout=20)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            if proc.stdout is not None:
                proc.stdout.close()

    with concurrent.futures.ThreadPoolExecutor(max_workers=10) as pool:
        codes = list(pool.map(lambda _: launch_and_terminate(), range(10)))
    assert codes == [0] * 10


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--port", "70000"], "argument --port: 70000 is out of range (must be between 0 and 65535)"),
        (["--port", "-1"], "argument --port: -1 is out of range"),
        (["--port", "http"], "argument --port: 'http' is not an integer"),
        (["--conflict-status", "200"], "argument --conflict-status: 200 is out of range"),
        (["--conflict-status", "600"], "argument --conflict-status: 600 is out of range"),
        (["--session-cap-lora", "-1"], "argument --session-cap-lora: -1 is out of range (must be >= 0)"),
        (["--session-cap-full", "-2"], "argument --session-cap-full: -2 is out of range"),
        (["--queue-position", "0"], "argument --queue-position: 0 is out of range (must be >= 1)"),
        (
            ["--timings", "resource_pending=-1"],
            "resource_pending: '-1' must be a finite number of seconds >= 0",
        ),
        (["--timings", "all=nan"], "all: 'nan' must be a finite number of seconds >= 0"),
        (["--timings", "session_stopping=inf"], "must be a finite number of seconds >= 0"),
    ],
)
def test_cli_out_of_range_numbers_are_usage_errors(args, message):
    result = subprocess.run(
        [sys.executable, "-m", "pulumi_together_rl.emulator", *args],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert result.returncode == 2, result.stderr[-500:]
    assert result.stderr.startswith("usage:")
    assert message in result.stderr
    assert "Traceback" not in result.stderr
    assert result.stdout == ""


def test_cli_accepts_the_bounds_of_its_numeric_options():
    from pulumi_together_rl.emulator.__main__ import build_parser, settings_from_args

    args = build_parser().parse_args(
        [
            "--port",
            "65535",
            "--conflict-status",
            "599",
            "--session-cap-lora",
            "0",
            "--session-cap-full",
            "0",
            "--queue-position",
            "1",
            "--timings",
            "all=0",
        ]
    )
    assert args.port == 65535
    settings = settings_from_args(args)
    assert settings["conflict_status"] == 599
    assert (settings["session_cap_lora"], settings["session_cap_full"], settings["queue_position"]) == (
        0,
        0,
        1,
    )
    EmulatorApp(**settings)  # and the settings validation agrees
    assert build_parser().parse_args(["--port", "0", "--conflict-status", "400"]).conflict_status == 400


def test_cli_help_documents_every_option():
    result = subprocess.run(
        [sys.executable, "-m", "pulumi_together_rl.emulator", "--help"],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert result.returncode == 0
    for option in (
        "--host",
        "--port",
        "--api-key",
        "--user-id",
        "--timings",
        "--conflict-status",
        "--session-cap-lora",
        "--session-cap-full",
        "--queue-position",
        "--supported-models",
        "--log-level",
    ):
        assert option in result.stdout
    for timing in ZERO:
        assert timing in result.stdout


def test_cli_rejects_bad_timings():
    result = subprocess.run(
        [sys.executable, "-m", "pulumi_together_rl.emulator", "--timings", "warp=1"],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert result.returncode == 2
    assert "unknown timing 'warp'" in result.stderr
    assert result.stdout == ""


# ------------------------------------------------------------------------------ framework error shapes


def test_framework_validation_errors_and_crashes_answer_the_envelope_never_422():
    server = EmulatorServer()

    @server.app.api.get("/probe/typed")
    async def typed(n: int) -> dict:
        return {"n": n}

    @server.app.api.get("/probe/crash")
    async def crash() -> dict:
        raise RuntimeError("boom")

    with server, httpx.Client(base_url=server.base_url) as client:
        invalid = client.get("/probe/typed", params={"n": "abc"})
        assert invalid.status_code == 400
        assert invalid.json()["error"]["param"] == "n"
        assert invalid.json()["error"]["type"] == "invalid_request_error"
        crashed = client.get("/probe/crash")
        assert crashed.status_code == 500
        assert crashed.json()["error"]["type"] == "server_error"
        assert "boom" in crashed.json()["error"]["message"]


def test_started_without_its_extra_the_emulator_says_how_to_install_it():
    # A real `python -m pulumi_together_rl.emulator` in a process where fastapi cannot be imported.
    blocker = (
        "import sys, runpy\n"
        "class Block:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name.split('.')[0] == 'fastapi':\n"
        "            raise ModuleNotFoundError(f'No module named {name!r}', name=name)\n"
        "sys.meta_path.insert(0, Block())\n"
        "sys.argv = ['emulator', '--port', '0']\n"
        "runpy.run_module('pulumi_together_rl.emulator', run_name='__main__')\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", blocker], capture_output=True, text=True, timeout=60, check=False
    )
    assert result.returncode == 2, result.stderr
    assert "pip install 'pulumi-together-rl[emulator]'" in result.stderr
    assert "Traceback" not in result.stderr
