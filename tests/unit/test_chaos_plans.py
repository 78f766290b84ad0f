"""The fault campaign's plans (scripts/chaos.py --dry-run): what `make chaos` is sure to contain whatever its draw."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_deadline_cycles_put_each_deadline_moment_in_the_campaign_and_replay_alone():
    def plans(*args: str) -> list[str]:
        result = subprocess.run(
            [sys.executable, str(ROOT / "scripts" / "chaos.py"), "--seed", "1", *args, "--dry-run"],
            capture_output=True,
            text=True,
            timeout=120,
            check=True,
        )
        return result.stdout.splitlines()

    # What `make chaos` appends after its 50 stand-in, 2 CLI and 3 runner cycles: cycles 55-57.
    appended = plans("--cycles", "50", "--cli-cycles", "2", "--runner-cycles", "3", "--deadline-cycles", "3")
    assert len(appended) == 58
    moments = []
    for line in appended[55:]:
        assert "(CLI)" not in line and "runner-" not in line, line
        (label,) = [word for word in line.split() if word.startswith("deadline-")]
        moments.append(label.split("-")[1])
    assert sorted(moments) == ["create", "outage", "refresh"], appended[55:]
    # The replay a finding prints (--first-cycle N --cycles 0 --deadline-cycles 1) is the same plan.
    for number, line in enumerate(appended[55:], start=55):
        (replayed,) = plans("--first-cycle", str(number), "--cycles", "0", "--deadline-cycles", "1")
        assert replayed == line
