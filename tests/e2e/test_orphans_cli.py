"""`python -m pulumi_together_rl orphans` as an operator runs it, against the emulator.

Most tests call the command's `main()` in this process (argument parsing, output, exit status); one runs it as
a real subprocess with `--stop`; `--stack` / `--all-stacks` go through a stand-in `pulumi` that records what
it is asked, and once through the real Pulumi CLI with a deployed stack.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import yaml

from pulumi_together_rl import journal
from pulumi_together_rl.__main__ import build_parser, main
from pulumi_together_rl.client import TogetherRL
from pulumi_together_rl.client.models import ModelResourceCreateRequest, TrainingSessionCreateRequest
from support.cli import ROOT, active

MODEL = "Qwen/Qwen3.5-4B"
RESOURCE_TYPE = "pulumi-python:dynamic/together:ModelResource"
SESSION_TYPE = "pulumi-python:dynamic/together:TrainingSession"


def export_of(*held: tuple[str, str]) -> dict:
    """A `pulumi stack export` document whose stack holds these (type, id) resources."""
    resources = [
        {"urn": "urn:pulumi:dev::team::pulumi:pulumi:Stack::team-dev", "type": "pulumi:pulumi:Stack"}
    ]
    for number, (kind, ident) in enumerate(held):
        resources.append(
            {"urn": f"urn:pulumi:dev::team::{kind}::r{number}", "custom": True, "id": ident, "type": kind}
        )
    return {"version": 3, "deployment": {"manifest": {"version": "v3.274.1"}, "resources": resources}}


@pytest.fixture
def client(emulator):
    with TogetherRL(api_key=emulator.api_key, base_url=emulator.base_url) as made:
        yield made


@pytest.fixture
def world(emulator, client, tmp_path):
    """A stack (dev.json) holding one resource and its session; a stray resource and a stray session on it."""
    kept = client.create_model_resource(ModelResourceCreateRequest(base_model=MODEL)).id
    kept_session = client.create_training_session(TrainingSessionCreateRequest(model_resources_id=kept)).id
    stray = client.create_model_resource(ModelResourceCreateRequest(base_model=MODEL)).id
    stray_session = client.create_training_session(TrainingSessionCreateRequest(model_resources_id=stray)).id
    state = tmp_path / "dev.json"
    state.write_text(json.dumps(export_of((RESOURCE_TYPE, kept), (SESSION_TYPE, kept_session))))
    emulator.control.clear_requests()
    return {
        "kept": kept,
        "kept_session": kept_session,
        "stray": stray,
        "stray_session": stray_session,
        "state": state,
    }


def run(capsys, *args: str) -> tuple[int, str, str]:
    """`python -m pulumi_together_rl orphans ARGS` in this process: (exit status, stdout, stderr)."""
    try:
        code = main(["orphans", *args])
    except SystemExit as exit:  # argparse
        code = exit.code
    out, err = capsys.readouterr()
    return code, out, err


def stops(emulator) -> list[str]:
    return [
        r["path"]
        for r in emulator.control.requests()
        if r["method"] == "POST" and r["path"].endswith("/stop")
    ]


def active_ids(emulator) -> set[str]:
    now = active(emulator)
    return {o["id"] for o in now["model_resources"] + now["training_sessions"]}


def test_a_dry_run_lists_what_no_stack_holds_and_stops_nothing(emulator, world, capsys):
    code, out, err = run(capsys, "--state", str(world["state"]))

    assert code == 0, err
    lines = out.strip().splitlines()
    assert len(lines) == 3, out
    assert lines[0].startswith(f"model resource    {world['stray']}  READY") and "/h" in lines[0]
    assert lines[1].startswith(f"training session  {world['stray_session']}  RUNNING")
    assert f"on model resource {world['stray']} (an orphan too)" in lines[1]
    assert world["kept"] not in out and world["kept_session"] not in out
    assert lines[2].startswith("2 orphans: 1 model resource (~$")
    assert lines[2].endswith(
        "/h), 1 training session. Dry run: nothing was stopped; run again with --stop to stop them."
    )
    assert stops(emulator) == []
    assert active_ids(emulator) == {
        world["kept"],
        world["kept_session"],
        world["stray"],
        world["stray_session"],
    }


def test_fail_if_any_exits_3_when_orphans_exist_and_0_when_none_do(emulator, world, client, tmp_path, capsys):
    assert run(capsys, "--state", str(world["state"]), "--fail-if-any")[0] == 3

    everything = tmp_path / "all.json"
    everything.write_text(
        json.dumps(
            export_of(
                (RESOURCE_TYPE, world["kept"]),
                (SESSION_TYPE, world["kept_session"]),
                (RESOURCE_TYPE, world["stray"]),
                (SESSION_TYPE, world["stray_session"]),
            )
        )
    )
    code, out, _ = run(capsys, "--state", str(everything), "--fail-if-any")
    assert code == 0
    assert out.strip() == (
        "No orphans: every active model resource and training session of this key's user is held by the given "
        "stack states (4 held ids in 1 state)."
    )


def test_stop_stops_exactly_the_orphans_sessions_first_and_leaves_held_ones_running(emulator, world, capsys):
    code, out, err = run(capsys, "--state", str(world["state"]), "--stop")

    assert code == 0, err
    assert stops(emulator) == [
        f"/v1/rl/training-sessions/{world['stray_session']}/stop",
        f"/v1/rl/model-resources/{world['stray']}/stop",
    ]
    assert active_ids(emulator) == {world["kept"], world["kept_session"]}
    assert f"stopped training session {world['stray_session']}" in out
    assert f"stopped model resource {world['stray']}" in out
    assert out.strip().splitlines()[-1].endswith("Stopped all 2.")


def test_a_refused_stop_is_reported_the_others_still_stop_and_the_exit_status_is_1(
    emulator, world, client, tmp_path, capsys
):
    # The stack holds a session on a resource it does not hold: that resource is an orphan whose stop is refused.
    state = tmp_path / "session-only.json"
    state.write_text(json.dumps(export_of((SESSION_TYPE, world["kept_session"]))))

    code, out, err = run(capsys, "--state", str(state), "--stop")

    assert code == 1
    assert f"error: stopping model resource ({world['kept']}): the API refused to stop it" in err
    assert world["kept_session"] in err and "Traceback" not in err
    assert active_ids(emulator) == {world["kept"], world["kept_session"]}
    assert "could not be stopped (see the errors above)" in out


def test_json_lists_the_orphans_as_objects(emulator, world, capsys):
    code, out, _ = run(capsys, "--state", str(world["state"]), "--json")

    assert code == 0
    listed = json.loads(out)
    assert [(o["kind"], o["id"], o["status"]) for o in listed] == [
        ("model_resource", world["stray"], "READY"),
        ("training_session", world["stray_session"], "RUNNING"),
    ]
    resource, session = listed
    assert (
        resource["base_model"] == MODEL and resource["price_per_hour"] > 0 and resource["currency"] == "USD"
    )
    assert session["model_resources_id"] == world["stray"]
    assert all(o["stopped"] is False and o["stop_error"] is None for o in listed)
    assert stops(emulator) == []


def test_json_with_stop_says_what_was_stopped(emulator, world, capsys):
    code, out, err = run(capsys, "--state", str(world["state"]), "--json", "--stop")

    assert code == 0
    assert [o["stopped"] for o in json.loads(out)] == [True, True]
    assert f"stopped model resource {world['stray']}" in err  # progress on stderr: stdout stays JSON


def test_no_stack_state_is_refused_with_one_clear_sentence(emulator, world, capsys):
    code, out, err = run(capsys)

    assert code == 2
    assert "finding orphans: no stack state was given, so every active object would look orphaned." in err
    assert "--state FILE" in err and "--none" in err
    assert out == "" and emulator.control.requests() == []


def test_none_contradicts_a_state_and_alone_makes_every_active_object_an_orphan(emulator, world, capsys):
    assert run(capsys, "--none", "--state", str(world["state"]))[0] == 2

    code, out, _ = run(capsys, "--none")
    assert code == 0
    assert out.strip().splitlines()[-1].startswith("4 orphans: 2 model resources (~$")
    assert stops(emulator) == []


def test_the_key_appears_nowhere_even_when_the_api_echoes_it(emulator, world, capsys):
    code, out, err = run(capsys, "--state", str(world["state"]), "--stop")
    assert code == 0 and emulator.api_key not in out + err

    emulator.control.add_fault(
        method="GET", path="model-resources$", status=401, times=None, message=f"bad key {emulator.api_key}"
    )
    code, out, err = run(capsys, "--state", str(world["state"]), "--api-key", emulator.api_key)

    assert code == 1
    assert err.startswith(
        "error: listing your active model resources: the API rejected the key (HTTP 401: bad key ***)"
    )
    assert err.strip().endswith("Check TOGETHER_API_KEY / --api-key.") and err.count("\n") == 1
    assert emulator.api_key not in out + err


def test_no_api_key_is_one_sentence(emulator, world, monkeypatch, capsys):
    monkeypatch.delenv("TOGETHER_API_KEY")

    code, out, err = run(capsys, "--state", str(world["state"]))

    assert code == 1 and out == ""
    assert err == (
        "error: connecting to the Together API: no API key. Set TOGETHER_API_KEY (or pass --api-key) to a key "
        "that may list and stop your model resources and training sessions.\n"
    )


def test_an_unreadable_state_file_is_one_sentence_and_nothing_is_listed(emulator, tmp_path, capsys):
    broken = tmp_path / "dev.json"
    broken.write_text("{not json")

    code, _, err = run(capsys, "--state", str(broken), "--stop")

    assert code == 1
    assert err.startswith(f"error: reading the stack export ({broken}): it is not JSON")
    assert "Traceback" not in err and emulator.control.requests() == []


def test_an_orphan_an_interrupted_pulumi_up_left_is_labelled(emulator, client, tmp_path, capsys):
    request = ModelResourceCreateRequest(base_model=MODEL)
    ident = client.create_model_resource(request).id
    entry = journal.begin("model resource", client.base_url, request.to_wire())
    entry.pid = _dead_pid()  # the interrupted `pulumi up`, gone
    entry.record(ident)

    code, out, _ = run(capsys, "--none")

    assert code == 0
    stamp = entry.started.strftime("%Y-%m-%d %H:%M UTC")
    assert f"{ident}  READY" in out and f"left by an interrupted pulumi up at {stamp}" in out


def test_stop_as_a_real_subprocess(emulator, world):
    result = subprocess.run(
        [sys.executable, "-m", "pulumi_together_rl", "orphans", "--state", str(world["state"]), "--stop"],
        capture_output=True,
        text=True,
        timeout=120,
        env=os.environ.copy(),  # TOGETHER_BASE_URL / TOGETHER_API_KEY of the emulator, the test's journal folder
        check=False,
    )

    assert result.returncode == 0, result.stderr
    assert active_ids(emulator) == {world["kept"], world["kept_session"]}
    assert stops(emulator) == [
        f"/v1/rl/training-sessions/{world['stray_session']}/stop",
        f"/v1/rl/model-resources/{world['stray']}/stop",
    ]
    assert result.stdout.strip().splitlines()[-1].endswith("Stopped all 2.")
    assert emulator.api_key not in result.stdout + result.stderr


# ------------------------------------------------------------------------------- through a Pulumi CLI


def stand_in_pulumi(directory: Path, exports: dict[str, dict], *, fail: str | None = None) -> Path:
    """A `pulumi` that answers `stack ls --json` and `stack export --stack NAME` and logs its calls."""
    directory.mkdir(parents=True, exist_ok=True)
    script = directory / "pulumi"
    script.write_text(
        textwrap.dedent(
            f"""\
            #!{sys.executable}
            import json, os, sys
            exports = {exports!r}
            with open({str(directory / "calls.jsonl")!r}, "a") as log:
                log.write(json.dumps({{"argv": sys.argv[1:], "cwd": os.getcwd()}}) + "\\n")
            if {fail!r}:
                sys.stderr.write("error: " + {fail!r} + "\\n")
                sys.exit(255)
            args = [a for a in sys.argv[1:] if a != "--non-interactive"]
            if args[:3] == ["stack", "ls", "--json"]:
                print(json.dumps([{{"name": n, "current": False, "updateInProgress": False}} for n in exports]))
            elif args[:3] == ["stack", "export", "--stack"]:
                print(json.dumps(exports[args[3]]))
            else:
                sys.exit(2)
            """
        )
    )
    script.chmod(0o755)
    return directory / "calls.jsonl"


def test_stack_and_all_stacks_export_through_the_cli_in_cwd(emulator, world, tmp_path, monkeypatch, capsys):
    exports = {
        "dev": export_of((RESOURCE_TYPE, world["kept"]), (SESSION_TYPE, world["kept_session"])),
        "prod": export_of((SESSION_TYPE, world["stray_session"])),
    }
    calls = stand_in_pulumi(tmp_path / "bin", exports)
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}")
    project = tmp_path / "project"
    project.mkdir()

    code, out, err = run(capsys, "--stack", "dev", "--cwd", str(project), "--json")
    assert code == 0, err
    assert {o["id"] for o in json.loads(out)} == {world["stray"], world["stray_session"]}

    code, out, err = run(capsys, "--all-stacks", "--cwd", str(project), "--json")
    assert code == 0, err
    assert [o["id"] for o in json.loads(out)] == [world["stray"]]

    logged = [json.loads(line) for line in calls.read_text().splitlines()]
    assert [c["argv"] for c in logged] == [
        ["stack", "export", "--stack", "dev", "--non-interactive"],
        ["stack", "ls", "--json", "--non-interactive"],
        ["stack", "export", "--stack", "dev", "--non-interactive"],
        ["stack", "export", "--stack", "prod", "--non-interactive"],
    ]
    assert {c["cwd"] for c in logged} == {str(project)}


def test_a_failing_or_missing_cli_is_one_sentence(emulator, world, tmp_path, monkeypatch, capsys):
    stand_in_pulumi(tmp_path / "bin", {}, fail="no stack named 'qa' found")
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}")

    code, out, err = run(capsys, "--stack", "qa")
    assert code == 1 and out == ""
    assert err.startswith(
        "error: exporting stack (qa): `pulumi stack export --stack qa` failed: error: no stack named 'qa' found."
    )

    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    code, _, err = run(capsys, "--all-stacks")
    assert code == 1
    assert "the Pulumi CLI (`pulumi`) is not on PATH" in err and "--state" in err
    assert emulator.control.requests() == []


def test_stack_through_the_real_pulumi_cli(cli_stack, emulator, client, capsys):
    stack = cli_stack(ROOT).init()
    stack.up()
    outputs = stack.outputs()
    stray = client.create_model_resource(ModelResourceCreateRequest(base_model=MODEL)).id
    env = {**stack.env, "TOGETHER_BASE_URL": emulator.base_url, "TOGETHER_API_KEY": emulator.api_key}
    env["TOGETHER_RL_STATE_DIR"] = os.environ["TOGETHER_RL_STATE_DIR"]

    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "pulumi_together_rl",
            "orphans",
            "--stack",
            stack.name,
            "--cwd",
            str(ROOT),
            "--json",
        ],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
        check=False,
    )

    assert result.returncode == 0, result.stderr
    assert [o["id"] for o in json.loads(result.stdout)] == [stray]
    assert {outputs["model_resource_id"], outputs["training_session_id"]} <= active_ids(emulator)
    assert emulator.api_key not in result.stdout + result.stderr

    # --stop stops the stray object and nothing the stack holds.
    stopped = subprocess.run(
        [
            sys.executable,
            "-m",
            "pulumi_together_rl",
            "orphans",
            "--stack",
            stack.name,
            "--cwd",
            str(ROOT),
            "--stop",
        ],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
        check=False,
    )
    assert stopped.returncode == 0, stopped.stderr
    assert stray not in active_ids(emulator)
    assert {outputs["model_resource_id"], outputs["training_session_id"]} <= active_ids(emulator)


def _dead_pid() -> int:
    process = subprocess.Popen([sys.executable, "-c", "pass"])
    process.wait()
    return process.pid


def test_the_scheduled_workflow_runs_a_valid_dry_run_from_main_only():
    workflow = yaml.safe_load(
        (ROOT / "examples" / "gitops" / ".github" / "workflows" / "orphans.yml").read_text()
    )
    triggers = workflow[True]  # YAML 1.1 reads the key `on` as True
    assert set(triggers) == {"schedule", "workflow_dispatch"} and triggers["schedule"][0]["cron"]
    job = workflow["jobs"]["orphans"]
    assert job["if"] == "github.ref == 'refs/heads/main'"
    steps = {step.get("name"): step for step in job["steps"]}
    exports = steps["Export the stacks"]["run"]
    assert "pulumi stack export --stack dev > dev.json" in exports
    assert "pulumi stack export --stack prod > prod.json" in exports

    command = shlex.split(steps["Find orphans"]["run"])
    assert command[:5] == ["uv", "run", "python", "-m", "pulumi_together_rl"]
    args = build_parser().parse_args(command[5:])
    assert (args.command, args.state, args.fail_if_any, args.stop) == (
        "orphans",
        ["dev.json", "prod.json"],
        True,
        False,
    )
    assert steps["Find orphans"]["env"]["TOGETHER_API_KEY"] == "${{ secrets.TOGETHER_API_KEY }}"


def test_a_state_that_holds_no_together_objects_or_has_pending_operations_gets_a_note(
    emulator, tmp_path, capsys
):
    state = export_of(("aws:s3/bucket:Bucket", "bucket-1"))
    state["deployment"]["pending_operations"] = [{"type": "creating", "resource": {"urn": "urn:x"}}]
    path = tmp_path / "other.json"
    path.write_text(json.dumps(state))

    code, _, err = run(capsys, "--state", str(path))

    assert code == 0
    assert f"note: {path} holds no Together model resources or training sessions." in err
    assert f"note: {path} has 1 pending operation(s): an update is running or was interrupted" in err
