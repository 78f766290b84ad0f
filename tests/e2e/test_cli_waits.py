"""Through the real Pulumi CLI: every create and every delete of a stack runs at once (the provider server's
4 workers widened, resources/_server.py), and one watcher serves all the waits.

With 4 workers, 8 sessions were POSTed in two waves, and a destroy stopped them 4 at a time.
"""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

from harness.cli import active

ROOT = Path(__file__).resolve().parents[2]
PROGRAM = """
import pulumi
from pulumi_together_rl import ModelResource, ModelResourceArgs, TrainingSession, TrainingSessionArgs

gpu = ModelResource("gpu", ModelResourceArgs(base_model="Qwen/Qwen3.5-4B"))
for s in range(8):
    TrainingSession(f"s{s}", TrainingSessionArgs(model_resource=gpu, lora_config={"rank": 8}))
"""


def _at(text: str) -> float:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def _spread(emulator, path_end: str) -> tuple[int, float]:
    times = [
        _at(r["at"])
        for r in emulator.control.requests()
        if r["method"] == "POST" and r["path"].endswith(path_end)
    ]
    return len(times), max(times) - min(times)


def test_eight_sessions_start_and_stop_at_once(cli_stack, emulator, tmp_path):
    project = tmp_path / "project"
    project.mkdir()
    (project / "Pulumi.yaml").write_text(
        f"name: waits\nruntime:\n  name: python\n  options:\n    toolchain: uv\n    virtualenv: {ROOT / '.venv'}\n"
    )
    (project / "__main__.py").write_text(PROGRAM)
    emulator.control.configure(session_cap_lora=8, timings={"session_creating": 4.0, "session_stopping": 4.0})
    stack = cli_stack(project)
    stack.init()
    emulator.control.clear_requests()

    stack.up("--parallel", "64")

    count, spread = _spread(emulator, "/training-sessions")
    assert count == 8 and spread < 4.0, (
        f"8 session creates sent over {spread:.1f} s: some waited for a worker"
    )
    lists = [
        r
        for r in emulator.control.requests()
        if r["method"] == "GET" and r["path"] == "/v1/rl/training-sessions"
    ]
    gets = [
        r
        for r in emulator.control.requests()
        if r["method"] == "GET" and r["path"].startswith("/v1/rl/training-sessions/")
    ]
    assert lists and len(gets) <= 8, (len(lists), len(gets))  # listed together, not polled one by one

    emulator.control.clear_requests()
    stack.run("destroy", "--yes", "--skip-preview", "--parallel", "64")  # a new provider process

    count, spread = _spread(emulator, "/stop")
    assert count == 9 and active(emulator) == {"model_resources": [], "training_sessions": []}
    stops = sorted(
        _at(r["at"])
        for r in emulator.control.requests()
        if r["method"] == "POST" and "/training-sessions/" in r["path"]
    )
    assert stops[-1] - stops[0] < 4.0, f"8 session stops sent over {stops[-1] - stops[0]:.1f} s"
