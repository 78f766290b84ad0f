"""How long 1 model resource + N training sessions take through the provider server, next to 1 + 1.

Not a test: prints numbers and ratios (timings on a shared 2-core machine are noisy). The providers are served by
the Pulumi SDK's own dynamic-provider server (`python -m pulumi.dynamic`, 4 worker threads) in a subprocess and
driven over gRPC by the test suite's stand-in engine, the way `pulumi up` / `pulumi destroy` drive them: Check and
Create of the resource, then Check and Create of every session at once (the engine runs independent steps in
parallel; the server runs at most 4 RPCs at a time), then the sessions' Deletes at once, then the resource's.
The emulator runs in this process with realistic-ish transition timings.

    uv run python scripts/bench_provider.py                    # the provider's default poll interval
    uv run python scripts/bench_provider.py --poll-interval 1
"""

from __future__ import annotations

import argparse
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))  # the stand-in engine lives with the tests

from pulumi_together_rl.emulator.control import EmulatorControl  # noqa: E402
from pulumi_together_rl.emulator.server import EmulatorServer  # noqa: E402
from pulumi_together_rl.resources.model_resource import _ModelResourceProvider  # noqa: E402
from pulumi_together_rl.resources.training_session import _TrainingSessionProvider  # noqa: E402
from support.engine import ProviderProcess, StandInEngine, provider_blob  # noqa: E402

MR = "pulumi-python:dynamic/together:ModelResource"
TS = "pulumi-python:dynamic/together:TrainingSession"
SERVER_WORKERS = 4  # pulumi.dynamic.__main__: ThreadPoolExecutor(max_workers=4)
API_KEY = "bench-key"


def run(engine: StandInEngine, sessions: int) -> dict[str, float]:
    """One up + destroy of 1 resource and ``sessions`` sessions; seconds per phase."""
    mr_blob, ts_blob = provider_blob(_ModelResourceProvider()), provider_blob(_TrainingSessionProvider())
    times: dict[str, float] = {}
    # More engine-side threads than server workers: the server's limit is what is measured.
    with ThreadPoolExecutor(max_workers=sessions + 1) as pool:
        start = time.perf_counter()
        news = {"__provider": mr_blob, "base_model": "Qwen/Qwen3.5-4B"}
        checked = engine.check(MR, "gpu", {}, news)
        gpu_id, gpu_outs = engine.create(MR, "gpu", checked.inputs)
        times["create resource"] = time.perf_counter() - start

        def create_session(n: int) -> tuple[str, str, dict]:
            name = f"run-{n}"
            inputs = {
                "__provider": ts_blob,
                "model_resources_id": gpu_id,
                "lora_config": {"rank": 16},
                "display_name": name,
            }
            result = engine.check(TS, name, {}, inputs)
            assert not result.failures, result.failures
            return (name, *engine.create(TS, name, result.inputs))

        mark = time.perf_counter()
        created = list(pool.map(create_session, range(sessions)))
        times["create sessions"] = time.perf_counter() - mark

        mark = time.perf_counter()
        list(pool.map(lambda s: engine.delete(TS, s[0], s[1], s[2]), created))
        times["delete sessions"] = time.perf_counter() - mark

        mark = time.perf_counter()
        engine.delete(MR, "gpu", gpu_id, gpu_outs)
        times["delete resource"] = time.perf_counter() - mark
        times["total"] = time.perf_counter() - start
    return times


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sessions", type=int, default=8)
    parser.add_argument("--poll-interval", type=float, default=None, help="seconds (default: the provider's)")
    parser.add_argument("--resource-pending", type=float, default=2.0)
    parser.add_argument("--resource-creating", type=float, default=3.0)
    parser.add_argument("--resource-stopping", type=float, default=1.0)
    parser.add_argument("--session-creating", type=float, default=1.0)
    parser.add_argument("--session-stopping", type=float, default=1.0)
    args = parser.parse_args()

    timings = {
        "resource_pending": args.resource_pending,
        "resource_creating": args.resource_creating,
        "resource_stopping": args.resource_stopping,
        "session_creating": args.session_creating,
        "session_stopping": args.session_stopping,
    }
    env = {"TOGETHER_API_KEY": None, "TOGETHER_BASE_URL": None, "TOGETHER_RL_POLL_INTERVAL": None}
    # The default LoRA cap (5) would refuse sessions 6-8 on one resource; a sweep of 8 needs a bigger cap.
    with EmulatorServer(timings=timings, session_cap_lora=max(5, args.sessions)) as server:
        control = EmulatorControl(server.base_url)
        config = {"together:apiKey": API_KEY, "together:baseUrl": server.base_url}
        if args.poll_interval is not None:
            config["together:pollInterval"] = str(args.poll_interval)
        results = {}
        for count in (1, args.sessions):
            control.reset()
            # A fresh server per run, as each `pulumi up` starts its own plugin process.
            with ProviderProcess(env=env, project="bench") as process:
                engine = StandInEngine(process, project="bench")
                engine.configure(config, secret_keys=["together:apiKey"])
                results[count] = run(engine, count)
        control.close()

    poll = args.poll_interval if args.poll_interval is not None else "default (10 s cap)"
    print(f"timings {timings}")
    print(f"poll interval {poll}; provider server with {SERVER_WORKERS} worker threads")
    one, many = results[1], results[args.sessions]
    print(f"{'phase':<18}{'1 + 1':>10}{f'1 + {args.sessions}':>10}{'ratio':>8}")
    for phase in one:
        ratio = f"{many[phase] / one[phase]:>8.2f}" if one[phase] > 0.005 else f"{'-':>8}"
        print(f"{phase:<18}{one[phase]:>9.2f}s{many[phase]:>9.2f}s{ratio}")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
