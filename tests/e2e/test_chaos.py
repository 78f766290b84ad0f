"""A short run of the seeded fault campaign (scripts/chaos.py), as a subprocess: `make chaos` runs the long one.

Seed 223, cycles 0-4: interrupts (SIGKILL of the provider during a session create's POST and during a model
resource's wait), out-of-band stops of a session and of the resource between two ups, an injected ERROR, a
create timeout, act-then-fail creates and stops, time-windowed outages, 429 with and without Retry-After, 5xx,
dropped connections, latency, read and list lag. None of the slow faults (an unanswered create's 60 s settle
window, an ignored stop's 15 s re-stop): about a minute on 2 cores.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SEED = 223
CYCLES = 5
MUST_BE_ZERO = ("orphans", "duplicates", "billed after destroy", "lost state", "key leaks")


def test_a_short_seeded_fault_campaign_leaves_no_orphan_duplicate_bill_lost_state_or_leak():
    result = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "chaos.py"), "--seed", str(SEED), "--cycles", str(CYCLES)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=110,
        check=False,
    )
    report = f"stdout:\n{result.stdout}\nstderr:\n{result.stderr}"
    figures = {name: int(value) for name, value in re.findall(r"^([a-z ]+): (\d+)$", result.stdout, re.M)}

    assert figures.get("cycles") == CYCLES, report
    assert figures["faults injected"] > 0, report
    assert {name: figures[name] for name in MUST_BE_ZERO} == dict.fromkeys(MUST_BE_ZERO, 0), report
    assert result.returncode == 0, report
