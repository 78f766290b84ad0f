"""How long 1 model resource + N training sessions take through the provider, next to 1 + 1.

Not a test: prints numbers. The provider methods are driven the way the engine drives the dynamic-provider
server: at most 4 RPCs at once (the server's 4 worker threads), the resource first, then the sessions (they
depend on its id), then destroy in reverse order. The emulator runs with realistic-ish transition timings.

    uv run python scripts/bench_provider.py                 # default poll interval (10 s, growing from 1 s)
    uv run python scripts/bench_provider.py --poll-interval 1
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import sys
import time
from concurrent.futures import ThreadPoolExecutor

from pulumi.dynamic import Config, ConfigureRequest

from pulumi_together_rl import config
from pulumi_together_rl.emulator.control import EmulatorControl
from pulumi_together_rl.emulator.server import EmulatorServer
from pulumi_together_rl.resources import _base
from pulumi_together_rl.resources.model_resource import _ModelResourceProvider
from pulumi_together_rl.resources.training_session import _TrainingSessionProvider

WORKERS = 4  # pulumi.dynamic.__main__: ThreadPoolExecutor(max_workers=4)
API_KEY = "bench-key"


def run(base_url: str, sessions: int) -> dict[str, float]:
    """One up + destroy of 1 resource and ``sessions`` sessions; seconds per phase."""
    raw = {"together:apiKey": API_KEY, "together:baseUrl": base_url}
    resources, session_provider = _ModelResourceProvider(), _TrainingSessionProvider()
    for provider in (resources, session_provider):
        provider.configure(ConfigureRequest(Config(raw_config=raw, project_name="bench")))
    times: dict[str, float] = {}
    with ThreadPoolExecutor(max_workers=WORKERS) as pool:
        start = time.perf_counter()
        checked = resources.check({}, {"base_model": "Qwen/Qwen3.5-4B"})
        resource = pool.submit(resources.create, checked.inputs).result()
        times["create resource"] = time.perf_counter() - start

        def create_session(n: int):
            news = {
                "model_resources_id": resource.id,
                "lora_config": {"rank": 16},
                "display_name": f"run-{n}",
            }
            result = session_provider.check({}, news)
            assert not result.failures, result.failures
            return session_provider.create(result.inputs)

        mark = time.perf_counter()
        created = list(pool.map(create_session, range(sessions)))
        times["create sessions"] = time.perf_counter() - mark

        mark = time.perf_counter()
        list(pool.map(lambda s: session_provider.delete(s.id, s.outs), created))
        times["delete sessions"] = time.perf_counter() - mark

        mark = time.perf_counter()
        pool.submit(resources.delete, resource.id, resource.outs).result()
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

    if args.poll_interval is not None:
        os.environ["TOGETHER_RL_POLL_INTERVAL"] = str(args.poll_interval)
    timings = {
        "resource_pending": args.resource_pending,
        "resource_creating": args.resource_creating,
        "resource_stopping": args.resource_stopping,
        "session_creating": args.session_creating,
        "session_stopping": args.session_stopping,
    }
    # The default LoRA cap (5) would refuse sessions 6-8 on one resource; a sweep needs a bigger cap.
    with EmulatorServer(timings=timings, session_cap_lora=max(5, args.sessions)) as server:
        control = EmulatorControl(server.base_url)
        results = {}
        for count in (1, args.sessions):
            control.reset()
            config.reset()
            _base.clear_caches()
            with contextlib.redirect_stderr(io.StringIO()):  # progress lines: not what we measure
                results[count] = run(server.base_url, count)
        control.close()

    poll = args.poll_interval if args.poll_interval is not None else config.current().poll_interval
    print(f"timings {timings}, poll interval {poll:g} s, {WORKERS} worker threads")
    one, many = results[1], results[args.sessions]
    print(f"{'phase':<18}{'1 + 1':>10}{f'1 + {args.sessions}':>10}{'ratio':>8}")
    for phase in one:
        print(f"{phase:<18}{one[phase]:>9.2f}s{many[phase]:>9.2f}s{many[phase] / one[phase]:>8.2f}")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
