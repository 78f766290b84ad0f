"""Typed for users: a program written against the public Args passes ``mypy --strict``, and mistakes fail it.

mypy runs in a subprocess (``sys.executable -m mypy``) as a user's checker would: from a folder outside the
repository, no config file, the package found where it is installed (this venv), so only its ``py.typed`` and
its own annotations decide what the checker sees. Without the marker the import is ``import-untyped``; with a
module ``__getattr__`` visible to the checker every name would exist as ``Any``. ``wrong_program.py`` proves the
typing is real: each of its ``# E: <text>`` comments must be matched by an error on the line it precedes, and
there must be no other error.

mypy runs once per program for the module, with a cache in a temp folder that the second run reuses (the first
analyses pulumi and this package; the second takes about a second).

No ``__init__.py`` in this folder: as a regular package, ``tests/typing`` could shadow the standard ``typing``.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
USER_PROGRAM = HERE / "user_program.py"
WRONG_PROGRAM = HERE / "wrong_program.py"

#: ``path:line: error: message  [code]`` (mypy's default output, without ``--pretty``)
ERROR = re.compile(r"^(?P<path>.+?):(?P<line>\d+): error: (?P<message>.*)$")
EXPECTED = re.compile(r"^\s*# E: (?P<text>.+?)\s*$")


@pytest.fixture(scope="module")
def mypy(tmp_path_factory):
    """Runs ``mypy --strict`` on one file, cached per program for the module."""
    workdir = tmp_path_factory.mktemp("mypy")  # the cwd: outside the repository, no config to find
    cache = workdir / ".mypy_cache"
    env = {k: v for k, v in os.environ.items() if not k.startswith("MYPY")}
    results: dict[Path, subprocess.CompletedProcess[str]] = {}

    def run(program: Path) -> subprocess.CompletedProcess[str]:
        if program not in results:
            results[program] = subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "mypy",
                    "--config-file=",  # an empty name: read no config file (neither the user's nor a project's)
                    "--strict",
                    "--cache-dir",
                    str(cache),
                    "--no-color-output",
                    "--no-pretty",
                    str(program),
                ],
                cwd=workdir,
                env=env,
                capture_output=True,
                text=True,
                timeout=240,
            )
        return results[program]

    return run


def _errors(output: str, program: Path) -> dict[int, list[str]]:
    found: dict[int, list[str]] = {}
    for line in output.splitlines():
        match = ERROR.match(line)
        if match and Path(match["path"]).name == program.name:
            found.setdefault(int(match["line"]), []).append(match["message"])
    return found


def _expected(program: Path) -> dict[int, str]:
    """``{line: text}``: each ``# E: text`` comment, for the next line that is not a comment."""
    expected: dict[int, str] = {}
    pending: str | None = None
    for number, line in enumerate(program.read_text().splitlines(), start=1):
        match = EXPECTED.match(line)
        if match:
            assert pending is None, f"{program.name}:{number}: two `# E:` comments for one line"
            pending = match["text"]
        elif pending is not None and line.strip() and not line.lstrip().startswith("#"):
            expected[number], pending = pending, None
    assert pending is None, f"{program.name}: a trailing `# E:` comment with no line after it"
    return expected


def test_the_package_ships_the_py_typed_marker():
    import pulumi_together_rl

    assert (Path(pulumi_together_rl.__file__).parent / "py.typed").is_file()


def test_the_typed_dicts_are_exported_at_run_time_too():
    """What the checker sees through ``if TYPE_CHECKING:`` imports, the lazy exports give at run time."""
    import pulumi_together_rl
    from pulumi_together_rl.resources import functions, model_resource, training_session

    for name in pulumi_together_rl.__all__:
        if name != "__version__":
            value = getattr(pulumi_together_rl, name)
            assert any(value is getattr(m, name, None) for m in (model_resource, training_session, functions))


def test_a_user_program_against_the_public_args_passes_mypy_strict(mypy):
    result = mypy(USER_PROGRAM)
    assert result.returncode == 0, f"mypy --strict on {USER_PROGRAM.name}:\n{result.stdout}{result.stderr}"
    assert "Success: no issues found in 1 source file" in result.stdout


def test_mistakes_against_the_public_args_fail_mypy_strict_where_expected(mypy):
    result = mypy(WRONG_PROGRAM)
    report = f"mypy --strict on {WRONG_PROGRAM.name}:\n{result.stdout}{result.stderr}"
    assert result.returncode == 1, report  # 1: errors found (2 would be a crash or a usage error)
    expected, found = _expected(WRONG_PROGRAM), _errors(result.stdout, WRONG_PROGRAM)
    assert len(expected) >= 10, "the wrong program lost its `# E:` comments"
    missing = {
        line: text
        for line, text in expected.items()
        if not any(text in message for message in found.get(line, []))
    }
    unexpected = {line: messages for line, messages in found.items() if line not in expected}
    assert not missing, f"expected errors not reported (line: text): {missing}\n{report}"
    assert not unexpected, f"errors on lines not marked `# E:`: {unexpected}\n{report}"
