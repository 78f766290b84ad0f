"""How the provider waits, next to the official SDK's create-and-wait helpers (together 3.1.1), against the emulator.

Not a test: prints figures and ratios against the targets (timings on a shared 2-core machine are noisy). The
providers run in the Pulumi SDK's own dynamic-provider server (`python -m pulumi.dynamic`) in a subprocess,
driven over gRPC by the test suite's stand-in engine, as `pulumi up` / `pulumi destroy` drive them. Requests are
told apart by their User-Agent in the emulator's request log.

1. Ready-detection overshoot: single model-resource creates that become READY after D seconds (D = 12.4, 27.7,
   44.2, 58.9: off both tools' tick phases, which would make an overshoot 0 or a whole interval), each run next
   to the SDK's `ModelResourcesClient.create`; overshoot = the end of the wait minus the flip.
2. Requests: 8 concurrent session waits of ~30 s against one, and against the SDK's `SessionClient.create` x 8.
3. Convergence with session start 10 s and stop 5 s: 1 + 1, 2 + 16 and 4 + 20 (create + destroy), and how long a
   READY resource waits for its first session's POST.
4. Calls: `diff` of 20 resources, preview (check) of a 20-resource stack, refresh (read) of 20 resources.

    uv run python scripts/bench_waits.py            # all (about 6 minutes)
    uv run python scripts/bench_waits.py --only 1 3
"""

from __future__ import annotations

import argparse
import contextlib
import io
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

from harness.engine import ProviderProcess, StandInEngine, provider_blob  # noqa: E402

from pulumi_together_rl.emulator.control import EmulatorControl  # noqa: E402
from pulumi_together_rl.emulator.server import EmulatorServer  # noqa: E402
from pulumi_together_rl.resources.model_resource import _ModelResourceProvider  # noqa: E402
from pulumi_together_rl.resources.training_session import _TrainingSessionProvider  # noqa: E402

MR = "pulumi-python:dynamic/together:ModelResource"
TS = "pulumi-python:dynamic/together:TrainingSession"
MODEL = "Qwen/Qwen3.5-4B"
API_KEY = "bench-key"
OURS = "pulumi-together-rl"
MR_BLOB, TS_BLOB = provider_blob(_ModelResourceProvider()), provider_blob(_TrainingSessionProvider())
ENV = {"TOGETHER_API_KEY": None, "TOGETHER_BASE_URL": None, "TOGETHER_RL_POLL_INTERVAL": None}
FAST = {"resource_pending": 0.0, "resource_creating": 0.5, "resource_stopping": 0.2, "session_creating": 0.5,
        "session_stopping": 0.2}  # fmt: skip


def _at(text: str) -> float:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


class Bench:
    def __init__(self, server: EmulatorServer) -> None:
        self.server = server
        self.control = EmulatorControl(server.base_url)
        self.config = {"together:apiKey": API_KEY, "together:baseUrl": server.base_url}

    @contextlib.contextmanager
    def engine(self):
        # A fresh server per run, as each `pulumi up` starts its own plugin process.
        with ProviderProcess(env=ENV, project="bench") as process:
            engine = StandInEngine(process, project="bench")
            engine.configure(self.config, secret_keys=["together:apiKey"])
            yield engine

    def requests(self, *, ours: bool, method: str = "GET") -> list[dict]:
        return [
            r
            for r in self.control.requests()
            if r["method"] == method and (r.get("user_agent") or "").startswith(OURS) == ours
        ]

    # ---------------------------------------------------------------------------------------------- 1

    def overshoot(self, durations: list[float]) -> tuple[list[float], list[float]]:
        from together.post_training import ModelResourcesClient

        ours, sdk = [], []
        for d in durations:
            self.control.reset()
            self.control.configure(timings={**FAST, "resource_pending": 0.0, "resource_creating": d})
            results: dict[str, tuple[str, float]] = {}
            with self.engine() as engine:

                def ours_wait(results: dict = results) -> None:
                    checked = engine.check(MR, "gpu", {}, {"__provider": MR_BLOB, "base_model": MODEL})
                    ident, _ = engine.create(MR, "gpu", checked.inputs)
                    results["ours"] = (ident, time.time())

                def sdk_wait(results: dict = results) -> None:
                    client = ModelResourcesClient.create(
                        api_key=API_KEY, base_url=self.server.base_url, base_model=MODEL
                    )
                    results["sdk"] = (client.model_resources_id, time.time())

                with contextlib.redirect_stdout(io.StringIO()):  # the SDK prints a line per poll
                    threads = [threading.Thread(target=f) for f in (ours_wait, sdk_wait)]
                    for t in threads:
                        t.start()
                    for t in threads:
                        t.join()
            created = {o["id"]: _at(o["created_at"]) for o in self.control.state()["model_resources"]}
            for who, into in (("ours", ours), ("sdk", sdk)):
                ident, end = results[who]
                into.append(end - (created[ident] + d))
        return ours, sdk

    # ---------------------------------------------------------------------------------------------- 2

    def session_calls(self, n: int, seconds: float) -> tuple[int, int]:
        """(our GETs for n concurrent ~``seconds`` session waits, the SDK's GETs for the same)."""
        from together.post_training import SessionClient

        self.control.reset()
        self.control.configure(timings={**FAST}, session_cap_lora=max(5, 2 * n))
        with self.engine() as engine:
            checked = engine.check(MR, "gpu", {}, {"__provider": MR_BLOB, "base_model": MODEL})
            gpu, _ = engine.create(MR, "gpu", checked.inputs)
            self.control.configure(timings={**FAST, "session_creating": seconds})
            self.control.clear_requests()

            def ours(i: int) -> None:
                news = {"__provider": TS_BLOB, "model_resources_id": gpu, "display_name": f"o{i}"}
                checked = engine.check(TS, f"o{i}", {}, news)
                engine.create(TS, f"o{i}", checked.inputs)

            def sdk(i: int) -> None:
                SessionClient.create(
                    model_resources_id=gpu,
                    api_key=API_KEY,
                    base_url=self.server.base_url,
                    display_name=f"s{i}",
                )

            with ThreadPoolExecutor(2 * n) as pool, contextlib.redirect_stdout(io.StringIO()):
                list(
                    pool.map(
                        lambda f: f[0](f[1]), [(ours, i) for i in range(n)] + [(sdk, i) for i in range(n)]
                    )
                )
        return len(self.requests(ours=True)), len(self.requests(ours=False))

    # ---------------------------------------------------------------------------------------------- 3

    def converge(self, resources: int, sessions: int) -> tuple[float, float]:
        """(seconds for create + destroy, the longest a READY resource waited for its first session's POST)."""
        self.control.reset()
        timings = {"resource_pending": 2.0, "resource_creating": 3.0, "resource_stopping": 1.0,
                   "session_creating": 10.0, "session_stopping": 5.0}  # fmt: skip
        self.control.configure(timings=timings, session_cap_lora=16)
        per = sessions // resources
        start = time.perf_counter()
        with self.engine() as engine, ThreadPoolExecutor(resources + sessions) as pool:

            def resource(r: int) -> None:
                name = f"gpu{r}"
                checked = engine.check(MR, name, {}, {"__provider": MR_BLOB, "base_model": MODEL})
                ident, outs = engine.create(MR, name, checked.inputs)
                # The engine registers a resource's sessions as soon as its id is known: all at once.
                made = list(pool.map(lambda s: session(ident, f"{name}-s{s}"), range(per)))
                list(pool.map(lambda m: engine.delete(TS, *m), made))
                engine.delete(MR, name, ident, outs)

            def session(gpu: str, name: str):
                news = {"__provider": TS_BLOB, "model_resources_id": gpu, "display_name": name}
                checked = engine.check(TS, name, {}, news)
                return (name, *engine.create(TS, name, checked.inputs))

            list(pool.map(resource, range(resources)))
        took = time.perf_counter() - start
        state = self.control.state()
        ready_at = {o["id"]: _at(o["created_at"]) + 5.0 for o in state["model_resources"]}
        first_post: dict[str, float] = {}
        for r in self.control.requests():
            if (
                r["method"] == "POST"
                and r["path"] == "/v1/rl/training-sessions"
                and isinstance(r["body"], dict)
            ):
                rid = r["body"].get("model_resources_id")
                first_post[rid] = min(first_post.get(rid, float("inf")), _at(r["at"]))
        idle = max(first_post[rid] - ready_at[rid] for rid in first_post)
        return took, idle

    # ---------------------------------------------------------------------------------------------- 4

    def stack_calls(self, count: int) -> tuple[int, int, int]:
        """(requests of diff, of check (preview), of read (refresh)) for ``count`` model resources."""
        self.control.reset()
        self.control.configure(timings=FAST)
        with self.engine() as engine:
            news = {"__provider": MR_BLOB, "base_model": MODEL}
            made = []
            for i in range(count):
                checked = engine.check(MR, f"g{i}", {}, news)
                made.append((f"g{i}", *engine.create(MR, f"g{i}", checked.inputs), checked.inputs))
        counts = []
        with self.engine() as engine, ThreadPoolExecutor(count) as pool:  # a new `pulumi preview`
            self.control.clear_requests()
            list(pool.map(lambda m: engine.diff(MR, m[0], m[1], m[3], {**m[3], "create_timeout": 5.0}), made))
            counts.append(len(self.control.requests(clear=True)))
            # Declared as the resource classes declare them (an owner): the preview reads the account too.
            owned = [{**news, "owner": f"organization/bench/dev/new{i}"} for i in range(count)]
            list(pool.map(lambda i: engine.check(MR, f"new{i}", {}, owned[i]), range(count)))
            counts.append(len(self.control.requests(clear=True)))
        with self.engine() as engine, ThreadPoolExecutor(count) as pool:  # a new `pulumi refresh`
            self.control.clear_requests()
            list(pool.map(lambda m: engine.read(MR, m[0], m[1], m[2], m[3]), made))
            counts.append(len(self.control.requests(clear=True)))
        return counts[0], counts[1], counts[2]


def verdict(ok: bool) -> str:
    return "met" if ok else "MISSED"


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--only", type=int, nargs="*", default=[1, 2, 3, 4])
    args = parser.parse_args()
    missed = 0
    with EmulatorServer(timings=FAST) as server:
        bench = Bench(server)
        if 1 in args.only:
            ours, sdk = bench.overshoot([12.4, 27.7, 44.2, 58.9])
            mean_ours, mean_sdk = sum(ours) / len(ours), sum(sdk) / len(sdk)
            ratio = mean_ours / mean_sdk
            print("1. ready-detection overshoot, single waits of 12.4/27.7/44.2/58.9 s")
            print(f"   provider {' '.join(f'{x:.2f}' for x in ours)} s (mean {mean_ours:.2f} s); SDK "
                  f"{' '.join(f'{x:.2f}' for x in sdk)} s (mean {mean_sdk:.2f} s)")  # fmt: skip
            print(f"   ratio {ratio:.2f} (target <= 0.20: {verdict(ratio <= 0.2)})")
            missed += ratio > 0.2
        if 2 in args.only:
            one, _ = bench.session_calls(1, 30.0)
            eight, sdk8 = bench.session_calls(8, 30.0)
            print("2. GET requests of session waits of ~30 s")
            print(f"   provider 1 wait: {one}, 8 waits: {eight}; SDK 8 waits: {sdk8}")
            r1, r2 = eight / sdk8, eight / one
            print(f"   8 waits vs the SDK's 8: {r1:.2f} (target <= 1.0: {verdict(r1 <= 1.0)}); "
                  f"8 vs 1: {r2:.2f} (target <= 1.2: {verdict(r2 <= 1.2)})")  # fmt: skip
            missed += (r1 > 1.0) + (r2 > 1.2)
        if 3 in args.only:
            base, base_idle = bench.converge(1, 1)
            print("3. create + destroy, session start 10 s, stop 5 s (idle: a READY resource's wait for its "
                  "first session's POST)")  # fmt: skip
            print(f"   1 + 1: {base:.1f} s (idle {base_idle:.2f} s)")
            for resources, sessions, target in ((2, 16, 1.15), (4, 20, 1.2)):
                took, idle = bench.converge(resources, sessions)
                ratio = took / base
                print(f"   {resources} + {sessions}: {took:.1f} s (idle up to {idle:.2f} s), ratio {ratio:.2f} "
                      f"(target <= {target}: {verdict(ratio <= target)})")  # fmt: skip
                missed += ratio > target
        if 4 in args.only:
            diff, preview, refresh = bench.stack_calls(20)
            print("4. requests for 20 model resources")
            # Preview: the supported models and one estimate (2), then the account's spend (docs/cost.md): one list
            # and one estimate per configuration it runs (here the 20 resources of one configuration): 4.
            print(f"   diff {diff} (target 0: {verdict(diff == 0)}); preview {preview} (target <= 4: "
                  f"{verdict(preview <= 4)}); refresh {refresh} (target <= 4: {verdict(refresh <= 4)})")  # fmt: skip
            missed += (diff > 0) + (preview > 4) + (refresh > 4)
        bench.control.close()
    print(f"targets missed: {missed}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
