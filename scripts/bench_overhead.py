"""What the provider adds to a Pulumi command, next to the floor: a 20-resource stack (4 model resources with 4
sessions each) through the real Pulumi CLI, on each face against the emulator with instant provisioning (the
dynamic resources, and the plugin through its generated Python SDK, so that both programs are Python), and the
same shape of resources served by a dynamic provider that does nothing (``harness/noop_provider.py``).

Not a test: prints the median wall time of each command over ``--runs`` runs, and each face / the floor. The commands
that change nothing (``preview``, an ``up`` with no change, ``refresh``) are what a GitOps pipeline runs on every
pull request; ``destroy`` is there for completeness. Both projects refresh first (``refresh: always``, as the
examples do).

    uv run python scripts/bench_overhead.py [--runs 5] [--resources 4 --sessions 4]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace

from harness.cli import CLIStack, provide
from harness.faces import DYNAMIC, PLUGIN

from pulumi_together_rl.emulator.control import EmulatorControl
from pulumi_together_rl.emulator.server import EmulatorServer

ROOT = Path(__file__).resolve().parent.parent
API_KEY = "bench-key"
INSTANT = dict.fromkeys(
    ["resource_pending", "resource_creating", "resource_stopping", "session_creating", "session_stopping"],
    0.0,
)
OURS = """
import pulumi
from pulumi_together_rl import ModelResource, ModelResourceArgs, TrainingSession, TrainingSessionArgs

config = pulumi.Config()
for r in range(config.require_int("resources")):
    gpu = ModelResource(f"gpu{r}", ModelResourceArgs(base_model="Qwen/Qwen3.5-4B",
                                                    compute_config={"num_generator_replicas": 1}))
    for s in range(config.require_int("sessions")):
        TrainingSession(f"gpu{r}-s{s}", TrainingSessionArgs(model_resource=gpu, lora_config={"rank": 16}))
"""
PLUGIN_PROGRAM = """
import pulumi
import pulumi_together_rl_sdk as together_rl

config = pulumi.Config()
for r in range(config.require_int("resources")):
    gpu = together_rl.ModelResource(f"gpu{r}", base_model="Qwen/Qwen3.5-4B",
                                    compute_config={"num_generator_replicas": 1})
    for s in range(config.require_int("sessions")):
        together_rl.TrainingSession(f"gpu{r}-s{s}", model_resources_id=gpu.id, lora_config={"rank": 16})
"""
PLUGINS = f"plugins:\n  providers:\n    - name: together-rl\n      path: {ROOT / 'provider' / 'pulumi_together_rl' / 'plugin'}\n"
FLOOR = """
import pulumi
from harness.noop_provider import NoopModelResource, NoopTrainingSession

config = pulumi.Config()
for r in range(config.require_int("resources")):
    gpu = NoopModelResource(f"gpu{r}", "Qwen/Qwen3.5-4B", {"num_generator_replicas": 1})
    for s in range(config.require_int("sessions")):
        NoopTrainingSession(f"gpu{r}-s{s}", gpu, {"rank": 16})
"""
COMMANDS = {
    "preview": ("preview",),
    "up (no change)": ("up", "--yes", "--skip-preview"),
    "refresh": ("refresh", "--yes", "--skip-preview"),
}


def project(where: Path, program: str, extra: str = "") -> Path:
    where.mkdir()
    (where / "Pulumi.yaml").write_text(
        f"name: {where.name}\nruntime:\n  name: python\n  options:\n    toolchain: uv\n"
        f"    virtualenv: {ROOT / '.venv'}\noptions:\n  refresh: always\n{extra}"
    )
    (where / "__main__.py").write_text(program)
    return where


def measure(stack: CLIStack, runs: int) -> dict[str, float]:
    """Median seconds of each command on the deployed stack, then of its destroy (once: it ends the stack)."""
    times: dict[str, list[float]] = {name: [] for name in COMMANDS}
    for _ in range(runs):
        for name, args in COMMANDS.items():
            start = time.perf_counter()
            stack.run(*args)
            times[name].append(time.perf_counter() - start)
    start = time.perf_counter()
    stack.run("destroy", "--yes", "--skip-preview")
    return {
        **{name: statistics.median(t) for name, t in times.items()},
        "destroy": time.perf_counter() - start,
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--resources", type=int, default=4)
    parser.add_argument("--sessions", type=int, default=4)
    args = parser.parse_args()
    bin_dir, reason = provide()
    if bin_dir is None:
        sys.exit(f"bench_overhead: {reason}")
    shape = {"resources": args.resources, "sessions": args.sessions}
    results: dict[str, dict[str, float]] = {}
    with EmulatorServer(timings=INSTANT, session_cap_lora=16, api_key=API_KEY) as server:
        control = EmulatorControl(server.base_url)
        emulator = SimpleNamespace(base_url=server.base_url, api_key=API_KEY, control=control)
        with tempfile.TemporaryDirectory() as tmp:
            faces = (("floor", FLOOR, "", DYNAMIC), ("dynamic", OURS, "", DYNAMIC),
                     ("plugin", PLUGIN_PROGRAM, PLUGINS, PLUGIN))  # fmt: skip
            for label, program, extra, face in faces:
                control.reset()
                # Python caches compiled modules (.pyc) as a user's machine does: with PYTHONDONTWRITEBYTECODE
                # (set in some containers) every command would compile pulumi, httpx and pydantic anew.
                stack = CLIStack(project(Path(tmp) / label, program, extra), Path(tmp) / f"{label}-stack",
                                 emulator, bin_dir=bin_dir, face=face, PYTHONDONTWRITEBYTECODE=None)  # fmt: skip
                try:
                    stack.init(shape)
                    stack.up()
                    results[label] = measure(stack, args.runs)
                finally:
                    stack.destroy_and_remove()
        control.close()
    total = args.resources * (1 + args.sessions)
    print(
        f"{total} resources, instant provisioning, median of {args.runs} runs (destroy: 1), the real Pulumi CLI"
    )
    print(
        f"{'command':<16}{'floor':>9}{'dynamic':>9}{'plugin':>9}{'dyn/floor':>11}{'plug/floor':>11}{'plug/dyn':>10}"
    )
    for name in (*COMMANDS, "destroy"):
        floor, dyn, plug = (results[label][name] for label in ("floor", "dynamic", "plugin"))
        print(f"{name:<16}{floor:>8.2f}s{dyn:>8.2f}s{plug:>8.2f}s{dyn / floor:>11.2f}{plug / floor:>11.2f}"
              f"{plug / dyn:>10.2f}")  # fmt: skip


if __name__ == "__main__":
    main()
