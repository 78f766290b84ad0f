"""`pulumi up` + `pulumi destroy` of 1 model resource + N sessions through the real Pulumi CLI, next to 1 + 1.

Not a test: prints wall times and ratios (a shared 2-core machine is noisy). The program is examples/sweep with
`sessions=N`, run against an emulator in this process with the same transition timings as
scripts/bench_provider.py, so the two scripts' figures can be read side by side: that one drives the provider
server with the stand-in engine, this one with the real engine (its own parallelism, plugin start-up, the
program itself, refresh off).

    uv run python scripts/bench_cli.py --sessions 8
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))  # the CLI harness lives with the tests

from pulumi_together_rl.emulator.control import EmulatorControl  # noqa: E402
from pulumi_together_rl.emulator.server import EmulatorServer  # noqa: E402
from support.cli import CLIStack  # noqa: E402

API_KEY = "bench-key"


def run(emulator: SimpleNamespace, sessions: int, poll: str | None) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as tmp:
        stack = CLIStack(ROOT / "examples" / "sweep", Path(tmp), emulator, TOGETHER_RL_POLL_INTERVAL=poll)
        try:
            stack.init({"sessions": sessions, "loraRanks": [16]})
            times = {}
            start = time.perf_counter()
            stack.up("--refresh=false")
            times["up"] = time.perf_counter() - start
            mark = time.perf_counter()
            stack.run("destroy", "--yes", "--skip-preview", "--refresh=false")
            times["destroy"] = time.perf_counter() - mark
            times["total"] = time.perf_counter() - start
            return times
        finally:
            stack.destroy_and_remove()


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sessions", type=int, default=8)
    parser.add_argument("--poll-interval", default=None, help="seconds (default: the provider's)")
    args = parser.parse_args()
    timings = {
        "resource_pending": 2.0,
        "resource_creating": 3.0,
        "resource_stopping": 1.0,
        "session_creating": 1.0,
        "session_stopping": 1.0,
    }
    with EmulatorServer(timings=timings, session_cap_lora=max(5, args.sessions), api_key=API_KEY) as server:
        control = EmulatorControl(server.base_url)
        emulator = SimpleNamespace(base_url=server.base_url, api_key=API_KEY, control=control)
        results = {}
        for count in (1, args.sessions):
            control.reset()
            results[count] = run(emulator, count, args.poll_interval)
        control.close()
    print(f"timings {timings}; poll interval {args.poll_interval or 'default'}; the real Pulumi CLI")
    one, many = results[1], results[args.sessions]
    print(f"{'phase':<10}{'1 + 1':>10}{f'1 + {args.sessions}':>10}{'ratio':>8}")
    for phase in one:
        print(f"{phase:<10}{one[phase]:>9.2f}s{many[phase]:>9.2f}s{many[phase] / one[phase]:>8.2f}")


if __name__ == "__main__":
    main()
