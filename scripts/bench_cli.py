"""`pulumi up` + `pulumi destroy` of R model resources x S sessions each through the real Pulumi CLI, next to 1 + 1.

Not a test: prints wall times and ratios (a shared 2-core machine is noisy). The program (written to a temporary
project) declares R resources and S sessions on each, run against an emulator in this process with session start
10 s and stop 5 s, as `scripts/bench_waits.py` section 3 does with the stand-in engine: the real engine adds its
own parallelism, plugin start-up and the program itself (refresh off).

    uv run python scripts/bench_cli.py --shape 2x8 --shape 4x5 [--parallel 64]

The engine itself runs at most ``--parallel`` resource operations at once (default 4 x the CPU count: 8 on 2
cores), so past that a stack waits for the engine, not for the provider.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace

ROOT = Path(__file__).resolve().parent.parent

from harness.cli import CLIStack, provide  # noqa: E402

from pulumi_together_rl.emulator.control import EmulatorControl  # noqa: E402
from pulumi_together_rl.emulator.server import EmulatorServer  # noqa: E402

API_KEY = "bench-key"
TIMINGS = {"resource_pending": 2.0, "resource_creating": 3.0, "resource_stopping": 1.0, "session_creating": 10.0,
           "session_stopping": 5.0}  # fmt: skip
PROGRAM = """
import pulumi
from pulumi_together_rl import ModelResource, ModelResourceArgs, TrainingSession, TrainingSessionArgs

config = pulumi.Config()
for r in range(config.require_int("resources")):
    gpu = ModelResource(f"gpu{r}", ModelResourceArgs(base_model="Qwen/Qwen3.5-4B"))
    for s in range(config.require_int("sessions")):
        TrainingSession(f"gpu{r}-s{s}", TrainingSessionArgs(model_resource=gpu, lora_config={"rank": 16}))
"""


def run(
    emulator: SimpleNamespace, resources: int, sessions: int, parallel: list[str], bin_dir: str
) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as tmp:
        project = Path(tmp) / "project"
        project.mkdir()
        (project / "Pulumi.yaml").write_text(
            "name: bench\nruntime:\n  name: python\n  options:\n    toolchain: uv\n"
            f"    virtualenv: {ROOT / '.venv'}\n"
        )
        (project / "__main__.py").write_text(PROGRAM)
        stack = CLIStack(project, Path(tmp) / "stack", emulator, bin_dir=bin_dir)
        try:
            stack.init({"resources": resources, "sessions": sessions})
            start = time.perf_counter()
            stack.up("--refresh=false", *parallel)
            times = {"up": time.perf_counter() - start}
            mark = time.perf_counter()
            stack.run("destroy", "--yes", "--skip-preview", "--refresh=false", *parallel)
            times["destroy"] = time.perf_counter() - mark
            times["total"] = time.perf_counter() - start
            return times
        finally:
            stack.destroy_and_remove()


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--shape", action="append", default=None, help="RxS (default: 2x8)")
    parser.add_argument(
        "--parallel",
        type=int,
        default=None,
        help="pulumi --parallel (the CLI's default is 4 x the CPU count)",
    )
    args = parser.parse_args()
    bin_dir, reason = provide()
    if bin_dir is None:
        sys.exit(f"bench_cli: {reason}")
    shapes = [tuple(int(n) for n in s.split("x")) for s in (args.shape or ["2x8"])]
    with EmulatorServer(timings=TIMINGS, session_cap_lora=16, api_key=API_KEY) as server:
        control = EmulatorControl(server.base_url)
        emulator = SimpleNamespace(base_url=server.base_url, api_key=API_KEY, control=control)
        results = {}
        for shape in [(1, 1), *shapes]:
            control.reset()
            results[shape] = run(
                emulator, *shape, ["--parallel", str(args.parallel)] if args.parallel else [], bin_dir
            )
        control.close()
    print(f"timings {TIMINGS}; the real Pulumi CLI, --parallel {args.parallel or 'default'}")
    one = results[(1, 1)]
    for shape in shapes:
        many = results[shape]
        label = f"{shape[0]} + {shape[0] * shape[1]}"
        print(f"{'phase':<10}{'1 + 1':>10}{label:>10}{'ratio':>8}")
        for phase in one:
            print(f"{phase:<10}{one[phase]:>9.2f}s{many[phase]:>9.2f}s{many[phase] / one[phase]:>8.2f}")


if __name__ == "__main__":
    main()
