"""Import cost of this project's client next to the official ``together`` SDK.

Each import runs in a fresh interpreter (``sys.executable``), timed around the import statement itself, so
interpreter start-up is not counted; one warm-up run is discarded, then the median of ``--runs`` is shown.
The table also says whether an import pulled in a heavy module it must not (pulumi, fastapi, uvicorn,
together). ``--top N`` lists the N most expensive modules (self time, ``python -X importtime``) behind the
ready-to-use client.

    uv run python scripts/importtime.py [--runs 5] [--top 10] [--check]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys

HEAVY = ("pulumi", "fastapi", "uvicorn", "together")

#: httpx imports its command-line interface (click, rich, pygments) whenever those are installed; the dev venv
#: has them because `together` depends on them, a provider-only install (pulumi, httpx, pydantic) does not.
#: The "lean" rows hide them, as in such an install.
CLI_EXTRAS = ("rich", "click", "pygments")
LEAN = " (lean)"

#: (label, import statement)
ROWS = [
    ("pulumi_together_rl.client", "import pulumi_together_rl.client"),
    ("pulumi_together_rl.client.TogetherRL", "from pulumi_together_rl.client import TogetherRL"),
    ("pulumi_together_rl", "import pulumi_together_rl"),
    ("together", "import together"),
    ("together.Together", "from together import Together"),
    ("pulumi_together_rl.client.TogetherRL" + LEAN, "from pulumi_together_rl.client import TogetherRL"),
    ("together.Together" + LEAN, "from together import Together"),
]
OURS_READY = "pulumi_together_rl.client.TogetherRL"
THEIRS_READY = "together.Together"

_PROBE = """
import json, sys, time
for name in {hidden!r}:
    sys.modules[name] = None  # "not installed"
t = time.perf_counter()
{stmt}
elapsed = time.perf_counter() - t
heavy = sorted(m for m in {heavy!r} if m in sys.modules)
print(json.dumps({{"seconds": elapsed, "heavy": heavy}}))
"""


def measure(stmt: str, runs: int, hidden: tuple[str, ...] = ()) -> dict | None:
    """Median seconds of ``stmt`` over ``runs`` fresh interpreters, or None if it cannot be imported."""
    samples, heavy = [], []
    probe = _PROBE.format(stmt=stmt, heavy=HEAVY, hidden=hidden)
    for i in range(runs + 1):
        proc = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True)
        if proc.returncode != 0:
            return None
        result = json.loads(proc.stdout.strip().splitlines()[-1])
        heavy = result["heavy"]
        if i > 0:  # the first run warms the disk cache and writes .pyc files
            samples.append(result["seconds"])
    return {"median": statistics.median(samples), "min": min(samples), "heavy": heavy}


def top_modules(stmt: str, n: int) -> list[tuple[int, str]]:
    proc = subprocess.run([sys.executable, "-X", "importtime", "-c", stmt], capture_output=True, text=True)
    rows = []
    for line in proc.stderr.splitlines():
        if not line.startswith("import time:") or "self [us]" in line:
            continue
        self_us, _cumulative, name = (part.strip() for part in line[len("import time:") :].split("|"))
        rows.append((int(self_us), name.strip()))
    return sorted(rows, reverse=True)[:n]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--runs", type=int, default=5, help="fresh interpreters per import (median; default 5)"
    )
    parser.add_argument(
        "--top", type=int, default=0, help="also list the N costliest modules behind our client"
    )
    parser.add_argument("--check", action="store_true", help="exit 1 if our client pulls in a heavy module")
    args = parser.parse_args(argv)

    print(f"import time, median of {args.runs} fresh interpreters ({sys.executable})")
    print(
        f"lean = as installed without {', '.join(CLI_EXTRAS)} (httpx imports its CLI when they are present)"
    )
    print(f"{'import':<46} {'median':>10} {'min':>10}  heavy modules pulled in")
    results: dict[str, dict | None] = {}
    for label, stmt in ROWS:
        result = results[label] = measure(stmt, args.runs, CLI_EXTRAS if label.endswith(LEAN) else ())
        if result is None:
            print(f"{label:<46} {'not installed':>21}")
            continue
        heavy = ", ".join(result["heavy"]) or "none"
        print(f"{label:<46} {result['median'] * 1000:>8.1f} ms {result['min'] * 1000:>7.1f} ms  {heavy}")

    for suffix in ("", LEAN):
        ours, theirs = results.get(OURS_READY + suffix), results.get(THEIRS_READY + suffix)
        if ours and theirs:
            ratio = theirs["median"] / ours["median"]
            print(f"ratio{suffix}: {THEIRS_READY} / {OURS_READY} = {ratio:.1f}x")
    bare, plain = results.get("pulumi_together_rl.client"), results.get("together")
    if bare and plain:
        print(
            f"ratio: together / pulumi_together_rl.client (lazy, nothing used yet) = {plain['median'] / bare['median']:.0f}x"
        )

    if args.top:
        print(f"\ncostliest modules behind `{dict(ROWS)[OURS_READY]}` (self time):")
        for self_us, name in top_modules(dict(ROWS)[OURS_READY], args.top):
            print(f"  {self_us / 1000:>7.1f} ms  {name}")

    client_heavy = set()
    for label in ("pulumi_together_rl.client", OURS_READY):
        if results.get(label):
            client_heavy.update(results[label]["heavy"])
    if client_heavy:
        print(f"\nFAIL: importing the client pulled in {', '.join(sorted(client_heavy))}")
        return 1 if args.check else 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
