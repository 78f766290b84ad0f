"""What a create's commands cost with a file backend: `pulumi up` and `pulumi destroy` of the sweep example
(one GPU, one session) through the real CLI, against the emulator (instant timings), state in a local folder.

Not a test: prints each round's wall seconds and the medians. Run it with a checkout's own interpreter and that
checkout as ``--checkout`` (its harness, its provider, its program), two checkouts in turn, to compare them on
the same machine (a shared one: quote medians of paired rounds, never one figure):

    /path/to/a/.venv/bin/python scripts/bench_file_backend.py --checkout /path/to/a --rounds 3
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace

API_KEY = "tk-bench-0123456789abcdef-secret"
INSTANT = {
    "resource_pending": 0.0,
    "resource_creating": 0.0,
    "resource_stopping": 0.0,
    "session_creating": 0.0,
    "session_stopping": 0.0,
}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--checkout", type=Path, default=Path(__file__).resolve().parent.parent)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    root = args.checkout.resolve()
    sys.path[:0] = [str(root), str(root / "provider")]

    from harness.cli import CLIStack, provide

    from pulumi_together_rl.emulator.control import EmulatorControl
    from pulumi_together_rl.emulator.server import EmulatorServer

    bin_dir, why = provide()
    if bin_dir is None:
        raise SystemExit(f"no Pulumi CLI: {why}")
    with EmulatorServer(timings=INSTANT) as server, tempfile.TemporaryDirectory() as tmp:
        control = EmulatorControl(server.base_url)
        emulator = SimpleNamespace(base_url=server.base_url, api_key=API_KEY, control=control)
        server_key = {"TOGETHER_API_KEY": None, "TOGETHER_BASE_URL": None}
        stack = CLIStack(root / "examples" / "sweep", Path(tmp), emulator, bin_dir=bin_dir, **server_key)
        stack.init({"sessions": 1, "loraRanks": [8]}, api_key=API_KEY)
        ups, destroys = [], []
        try:
            for _ in range(args.rounds):
                started = time.monotonic()
                stack.up()
                ups.append(time.monotonic() - started)
                started = time.monotonic()
                stack.run("destroy", "--yes", "--skip-preview")
                destroys.append(time.monotonic() - started)
        finally:
            (stack.project / f"Pulumi.{stack.name}.yaml").unlink(missing_ok=True)
    print(
        f"{root}: up {' '.join(f'{t:.2f}' for t in ups)} (median {statistics.median(ups):.2f} s); "
        f"destroy {' '.join(f'{t:.2f}' for t in destroys)} (median {statistics.median(destroys):.2f} s)"
    )


if __name__ == "__main__":
    main()
