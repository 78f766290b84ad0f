"""`python -m pulumi_together_rl orphans` as an operator runs it, against the emulator.

Most tests call the command's `main()` in this process (argument parsing, output, exit status); some run it as
a real subprocess. The default (every stack of the backend), `--stack` and the stacks' config go through a
stand-in `pulumi` that records what it is asked, and through the real Pulumi CLI with real stacks: two stacks of
one backend (dev and prod), and a stack whose `pulumi up` was killed mid-create.

The objects the tests make are minutes old, younger than the default --min-age (90 min): a test that stops
one either passes --min-age 0 or makes the object older in the emulator (`backdate`: what a GPU left billing
since this morning looks like).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shlex
import signal
import subprocess
import sys
import textwrap
import time
from datetime import timedelta
from pathlib import Path

import pytest
import yaml
from harness.cli import ROOT, active, provider_pids, wait_until
from harness.faces import PLUGIN
from harness.journals import left

from pulumi_together_rl.__main__ import build_parser, main
from pulumi_together_rl.client import TogetherRL
from pulumi_together_rl.client.models import ModelResourceCreateRequest, TrainingSessionCreateRequest

SWEEP = ROOT / "examples" / "sweep"
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
    code, out, err = run(capsys, "--state", str(world["state"]), "--min-age", "0")

    assert code == 0, err
    lines = out.strip().splitlines()
    assert len(lines) == 5, out
    assert lines[0] == f"checked 1 stack: {world['state']}"
    assert lines[1] == (
        f"checked {emulator.base_url} (base URL from TOGETHER_BASE_URL) with the key from TOGETHER_API_KEY for "
        f"1 stack: {world['state']}"
    )
    assert lines[2].startswith(f"model resource    {world['stray']}  READY") and "/h" in lines[2]
    assert lines[3].startswith(f"training session  {world['stray_session']}  RUNNING")
    assert f"on model resource {world['stray']} (an orphan too)" in lines[3]
    assert world["kept"] not in out and world["kept_session"] not in out
    assert lines[4].startswith("2 orphans: 1 model resource (~$")
    assert lines[4].endswith(
        "/h), 1 training session. Dry run: nothing was stopped; run again with --stop to stop them."
    )
    assert "warning: only the given stack states were read" in err
    assert stops(emulator) == []
    assert active_ids(emulator) == {
        world["kept"],
        world["kept_session"],
        world["stray"],
        world["stray_session"],
    }


def test_fail_if_any_exits_3_when_orphans_exist_and_0_when_none_do(emulator, world, client, tmp_path, capsys):
    assert run(capsys, "--state", str(world["state"]), "--fail-if-any")[0] == 0  # all younger than --min-age
    assert run(capsys, "--state", str(world["state"]), "--fail-if-any", "--min-age", "0")[0] == 3

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
    code, out, _ = run(capsys, "--state", str(everything), "--fail-if-any", "--min-age", "0")
    assert code == 0
    assert out.strip().splitlines()[-1] == (
        "No orphans: every active model resource and training session of this key's user is held by the stack "
        "states read (4 held ids in 1 state)."
    )


def test_stop_stops_exactly_the_orphans_sessions_first_and_leaves_held_ones_running(emulator, world, capsys):
    code, out, err = run(capsys, "--state", str(world["state"]), "--stop", "--yes", "--min-age", "0")

    assert code == 0, err
    assert stops(emulator) == [
        f"/v1/rl/training-sessions/{world['stray_session']}/stop",
        f"/v1/rl/model-resources/{world['stray']}/stop",
    ]
    assert active_ids(emulator) == {world["kept"], world["kept_session"]}
    assert f"stopped training session {world['stray_session']}" in out
    assert f"stopped model resource {world['stray']}" in out
    assert out.strip().splitlines()[-1].endswith("Stopped all 2.")


def test_a_resource_a_held_session_runs_on_is_left_running_and_the_rest_still_stop(
    emulator, world, tmp_path, capsys
):
    # The stack holds a session on a resource it does not hold: the API would refuse to stop that resource.
    state = tmp_path / "session-only.json"
    state.write_text(json.dumps(export_of((SESSION_TYPE, world["kept_session"]))))

    code, out, err = run(capsys, "--state", str(state), "--stop", "--yes", "--min-age", "0")

    assert code == 0, err
    (line,) = [line for line in out.splitlines() if line.startswith(f"model resource    {world['kept']}")]
    assert line.endswith(
        f"--stop leaves it running: training sessions a stack holds run on it ({world['kept_session']}): stop or "
        "destroy them where they are managed first"
    )
    assert stops(emulator) == [
        f"/v1/rl/training-sessions/{world['stray_session']}/stop",
        f"/v1/rl/model-resources/{world['stray']}/stop",
    ]
    assert active_ids(emulator) == {world["kept"], world["kept_session"]}


def test_a_refused_stop_is_reported_the_others_still_stop_and_the_exit_status_is_1(
    emulator, world, client, capsys
):
    # Another user's session runs on the stray GPU: this key's user cannot see it, and the API refuses the stop.
    emulator.control.configure(user_id="user_someone_else")
    theirs = client.create_training_session(
        TrainingSessionCreateRequest(model_resources_id=world["stray"])
    ).id
    emulator.control.configure(user_id="user_emulator")

    code, out, err = run(capsys, "--state", str(world["state"]), "--stop", "--yes", "--min-age", "0")

    assert code == 1
    assert (
        f"error: stopping model resource ({world['stray']}): the API refused to stop it because training sessions "
        f"that are not orphans are attached: {theirs}"
    ) in err
    assert "Traceback" not in err
    assert active_ids(emulator) == {world["kept"], world["kept_session"], world["stray"], theirs}
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
    code, out, err = run(
        capsys, "--state", str(world["state"]), "--json", "--stop", "--yes", "--min-age", "0"
    )

    assert code == 0
    assert [o["stopped"] for o in json.loads(out)] == [True, True]
    assert f"stopped model resource {world['stray']}" in err  # progress on stderr: stdout stays JSON
    # The listing came first, on stderr, before anything was stopped.
    assert err.index(f"model resource    {world['stray']}") < err.index(
        f"stopped model resource {world['stray']}"
    )


def test_yes_without_stop_and_cwd_with_only_files_are_usage_errors(emulator, world, capsys):
    code, _, err = run(capsys, "--yes")
    assert code == 2 and "--yes answers the prompt of --stop; pass --stop with it." in err
    code, _, err = run(capsys, "--state", str(world["state"]), "--cwd", "/tmp")
    assert code == 2 and "it means nothing with only --state files or --none" in err
    assert emulator.control.requests() == []


def test_none_contradicts_a_state_and_alone_makes_every_active_object_an_orphan(emulator, world, capsys):
    assert run(capsys, "--none", "--state", str(world["state"]))[0] == 2

    code, out, _ = run(capsys, "--none")
    assert code == 0
    assert out.strip().splitlines()[-1].startswith("4 orphans: 2 model resources (~$")
    assert stops(emulator) == []


def test_the_key_appears_nowhere_even_when_the_api_echoes_it(emulator, world, capsys):
    code, out, err = run(capsys, "--state", str(world["state"]), "--stop", "--yes", "--min-age", "0")
    assert code == 0 and emulator.api_key not in out + err

    emulator.control.add_fault(
        method="GET", path="model-resources$", status=401, times=None, message=f"bad key {emulator.api_key}"
    )
    code, out, err = run(capsys, "--state", str(world["state"]), "--api-key", emulator.api_key)

    assert code == 1
    (error,) = [line for line in err.splitlines() if line.startswith("error:")]
    assert error == (
        f"error: listing your active model resources ({emulator.base_url}): the API rejected the key (HTTP 401: "
        "bad key ***). Check --api-key."
    )
    assert emulator.api_key not in out + err


def test_no_api_key_is_one_sentence(emulator, world, monkeypatch, capsys):
    monkeypatch.delenv("TOGETHER_API_KEY")

    code, out, err = run(capsys, "--state", str(world["state"]))

    assert code == 1 and out == f"checked 1 stack: {world['state']}\n"
    assert err.splitlines()[-1] == (
        "error: connecting to the Together API: no API key. Set TOGETHER_API_KEY (or pass --api-key, or set "
        "together:apiKey in the stacks' config) to a key that may list and stop your model resources and "
        "training sessions."
    )
    assert emulator.control.requests() == []


def test_an_unreadable_state_file_is_one_sentence_and_nothing_is_listed(emulator, tmp_path, capsys):
    broken = tmp_path / "dev.json"
    broken.write_text("{not json")

    code, _, err = run(capsys, "--state", str(broken), "--stop", "--yes")

    assert code == 1
    assert err.startswith(f"error: reading the stack export ({broken}): it is not JSON")
    assert "Traceback" not in err and emulator.control.requests() == []


def test_an_orphan_an_interrupted_pulumi_up_left_is_labelled(emulator, client, tmp_path, capsys):
    request = ModelResourceCreateRequest(base_model=MODEL)
    ident = client.create_model_resource(request).id
    # The interrupted `pulumi up` is gone: nobody holds its entry.
    entry = left(
        "model resource", client.base_url, request.to_wire(), "organization/team/dev/gpu", ident=ident
    )

    code, out, _ = run(capsys, "--none")

    assert code == 0
    stamp = entry.entry.started_at.strftime("%Y-%m-%d %H:%M UTC")
    assert f"{ident}  READY" in out
    assert f"left by an interrupted pulumi up of organization/team/dev/gpu at {stamp}" in out


def test_stop_as_a_real_subprocess(emulator, world):
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "pulumi_together_rl",
            "orphans",
            "--state",
            str(world["state"]),
            "--stop",
            "--yes",
            "--min-age",
            "0",
        ],
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


def stand_in_pulumi(
    directory: Path,
    exports: dict[str, dict],
    *,
    project: str = "team",
    configs: dict[str, dict[str, str]] | None = None,
    fail: str | None = None,
) -> Path:
    """A `pulumi` that answers as the real CLI does (the shapes measured with v3.274.1) and logs its calls:
    `stack ls [--all] --json --fully-qualify-stack-names` (every stack of `exports`, or those of `project`),
    `stack export --stack NAME`, and `config --json --show-secrets --stack NAME` (from `configs`). Stacks are
    named `organization/<project>/<stack>`; a short name is one of `project`'s, as for the real CLI."""
    directory.mkdir(parents=True, exist_ok=True)
    script = directory / "pulumi"
    script.write_text(
        textwrap.dedent(
            f"""\
            #!{sys.executable}
            import json, os, sys
            exports = {exports!r}
            configs = {configs or {}!r}
            project = {project!r}
            with open({str(directory / "calls.jsonl")!r}, "a") as log:
                log.write(json.dumps({{"argv": sys.argv[1:], "cwd": os.getcwd()}}) + "\\n")
            if {fail!r}:
                sys.stderr.write("error: " + {fail!r} + "\\n")
                sys.exit(255)
            args = [a for a in sys.argv[1:] if a != "--non-interactive"]

            def full(name):
                return name if name.count("/") == 2 else "organization/" + project + "/" + name.split("/")[-1]

            if args[:2] == ["stack", "ls"] and "--json" in args and "--fully-qualify-stack-names" in args:
                names = [n for n in exports if "--all" in args or n.split("/")[1] == project]
                print(json.dumps([{{"name": n, "current": False, "resourceCount": 3}} for n in names]))
            elif args[:3] == ["stack", "export", "--stack"] and full(args[3]) in exports:
                print(json.dumps(exports[full(args[3])]))
            elif args[:3] == ["stack", "export", "--stack"]:
                sys.stderr.write("error: no stack named '" + args[3] + "' found\\n")
                sys.exit(255)
            elif args[:4] == ["config", "--json", "--show-secrets", "--stack"]:
                config = configs.get(full(args[4]), {{}})
                print(json.dumps({{k: {{"value": v, "secret": k.endswith("apiKey")}} for k, v in config.items()}}))
            else:
                sys.exit(2)
            """
        )
    )
    script.chmod(0o755)
    return directory / "calls.jsonl"


def calls_of(log: Path) -> list[dict]:
    return [json.loads(line) for line in log.read_text().splitlines()]


@pytest.fixture
def backend(world, tmp_path, monkeypatch):
    """A backend of three stacks through the stand-in: team's dev (holds `kept` and its session) and prod
    (holds the stray session), and another project's ci (no Together object)."""
    exports = {
        "organization/team/dev": export_of(
            (RESOURCE_TYPE, world["kept"]), (SESSION_TYPE, world["kept_session"])
        ),
        "organization/team/prod": export_of((SESSION_TYPE, world["stray_session"])),
        "organization/other/ci": export_of(("aws:s3/bucket:Bucket", "bucket-1")),
    }
    project = tmp_path / "project"
    project.mkdir()
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}")
    return {"exports": exports, "project": project, "bin": tmp_path / "bin"}


def test_by_default_every_stack_of_the_backend_is_read_and_named(emulator, world, backend, capsys):
    calls = stand_in_pulumi(backend["bin"], backend["exports"])

    code, out, err = run(capsys, "--cwd", str(backend["project"]), "--min-age", "0")

    assert code == 0, err
    lines = out.splitlines()
    assert (
        lines[0] == "checked 3 stacks: organization/team/dev, organization/team/prod, organization/other/ci"
    )
    # prod holds the stray session and dev the other one; the stray resource carries prod's session.
    (line,) = [line for line in lines if line.startswith(("model resource", "training session"))]
    assert line.startswith(f"model resource    {world['stray']}")
    assert f"training sessions a stack holds run on it ({world['stray_session']})" in line
    assert "warning: only the given" not in err
    logged = calls_of(calls)
    assert {c["cwd"] for c in logged} == {str(backend["project"])}
    assert sorted(c["argv"][:-1] for c in logged) == sorted(
        [
            ["stack", "ls", "--json", "--fully-qualify-stack-names"],
            ["stack", "ls", "--all", "--json", "--fully-qualify-stack-names"],
            ["stack", "export", "--stack", "organization/team/dev"],
            ["stack", "export", "--stack", "organization/team/prod"],
            ["stack", "export", "--stack", "organization/other/ci"],
            # Only the project's own stacks: asked for another project's, the CLI answers this one's.
            ["config", "--json", "--show-secrets", "--stack", "organization/team/dev"],
            ["config", "--json", "--show-secrets", "--stack", "organization/team/prod"],
        ]
    )

    # --all-stacks is the default, named.
    code, again, _ = run(capsys, "--all-stacks", "--cwd", str(backend["project"]), "--min-age", "0")
    assert code == 0 and again == out


def test_stack_exports_only_the_named_stack_and_warns(emulator, world, backend, capsys):
    calls = stand_in_pulumi(backend["bin"], backend["exports"])

    code, out, err = run(capsys, "--stack", "dev", "--cwd", str(backend["project"]), "--json")

    assert code == 0, err
    assert {o["id"] for o in json.loads(out)} == {world["stray"], world["stray_session"]}
    assert err.splitlines()[0] == "checked 1 stack: organization/team/dev"
    assert "warning: only the given stack states were read" in err
    assert [c["argv"][:-1] for c in calls_of(calls)] == [
        ["stack", "ls", "--json", "--fully-qualify-stack-names"],
        ["stack", "export", "--stack", "dev"],
        ["config", "--json", "--show-secrets", "--stack", "organization/team/dev"],
    ]


def test_each_stack_is_checked_with_its_own_config_key_and_each_api_is_named(
    emulator, world, backend, monkeypatch, capsys
):
    configs = {
        "organization/team/dev": {
            "together:apiKey": "tk-dev-0123456789",
            "together:baseUrl": emulator.base_url,
        },
        "organization/team/prod": {
            "together:apiKey": "tk-prod-9876543210",
            "together:baseUrl": emulator.base_url + "/v1/",  # the same API, written another way
        },
    }
    stand_in_pulumi(backend["bin"], backend["exports"], configs=configs)
    monkeypatch.delenv("TOGETHER_API_KEY")

    code, out, err = run(capsys, "--cwd", str(backend["project"]), "--min-age", "0")

    assert code == 0, err
    lines = out.splitlines()
    assert (
        f"checked {emulator.base_url} (base URL from stack organization/team/dev's together:baseUrl) with the key "
        "from stack organization/team/dev's together:apiKey for 1 stack: organization/team/dev"
    ) in lines
    assert (
        f"checked {emulator.base_url} (base URL from stack organization/team/prod's together:baseUrl) with the "
        "key from stack organization/team/prod's together:apiKey for 1 stack: organization/team/prod"
    ) in lines
    # ci is another project's: its config is not read, and there is no key in the environment.
    assert (
        f"warning: not checked: the API of organization/other/ci ({emulator.base_url}): no together:apiKey could "
        "be read and neither --api-key nor TOGETHER_API_KEY is set."
    ) in err.splitlines()
    # Both keys belong to the emulator's one user: each orphan is listed (and would be stopped) once.
    assert [line.split()[2] for line in lines if line.startswith("model resource")] == [world["stray"]]
    assert "tk-dev-0123456789" not in out + err and "tk-prod-9876543210" not in out + err

    # A key the API rejects, and echoes back: named by its source, never shown.
    emulator.control.add_fault(
        method="GET", path="model-resources$", status=401, times=None, message="bad key tk-dev-0123456789"
    )
    code, out, err = run(capsys, "--cwd", str(backend["project"]))
    assert code == 1
    assert err.splitlines()[-1] == (
        f"error: listing your active model resources ({emulator.base_url}): the API rejected the key (HTTP 401: "
        "bad key ***). Check stack organization/team/dev's together:apiKey."
    )
    assert "tk-dev-0123456789" not in out + err and "tk-prod-9876543210" not in out + err


def test_a_failing_or_missing_cli_is_one_sentence(emulator, world, tmp_path, monkeypatch, capsys):
    stand_in_pulumi(tmp_path / "bin", {}, fail="no stack named 'qa' found")
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}")

    code, out, err = run(capsys, "--stack", "qa")
    assert code == 1 and out == ""
    assert err.splitlines()[-1].startswith(
        "error: exporting stack (qa): `pulumi stack export --stack qa` failed: error: no stack named 'qa' found."
    )

    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    code, _, err = run(capsys)
    assert code == 1
    assert (
        err.splitlines()[-1].startswith("error: listing the stacks of the backend, from")
        and "the Pulumi CLI (`pulumi`) is not on PATH" in err
        and "--state" in err
    )
    assert emulator.control.requests() == []


def orphans_cli(*args: str, env: dict[str, str], cwd: Path | str) -> subprocess.CompletedProcess[str]:
    """`python -m pulumi_together_rl orphans ARGS` as a subprocess, standard input not a terminal."""
    return subprocess.run(
        [sys.executable, "-m", "pulumi_together_rl", "orphans", *args],
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
        cwd=cwd,
        stdin=subprocess.DEVNULL,
        check=False,
    )


def backdate(emulator_server, ident: str, hours: float) -> None:
    """Make an object of the in-process emulator `hours` older, as one left billing since this morning is."""
    state = emulator_server.app.state
    with state._lock:
        record = state._resources.get(ident) or state._sessions[ident]
        record.created_at -= timedelta(hours=hours)


def test_stack_through_the_real_pulumi_cli_with_its_config_key(cli_stack, emulator, client):
    stack = cli_stack(ROOT).init()
    stack.up()
    outputs = stack.outputs()
    held = {outputs["model_resource_id"], outputs["training_session_id"]}
    stray = client.create_model_resource(ModelResourceCreateRequest(base_model=MODEL)).id
    env = dict(stack.env)  # no TOGETHER_API_KEY, no TOGETHER_BASE_URL: the stack's config has both
    assert not {"TOGETHER_API_KEY", "TOGETHER_BASE_URL"} & set(env)
    fq = f"organization/pulumi-together-rl/{stack.name}"

    listed = orphans_cli("--stack", stack.name, "--cwd", str(ROOT), "--json", env=env, cwd=ROOT)

    assert listed.returncode == 0, listed.stderr
    assert [o["id"] for o in json.loads(listed.stdout)] == [stray]
    assert (
        f"checked {emulator.base_url} (base URL from stack {fq}'s together:baseUrl) with the key from stack "
        f"{fq}'s together:apiKey for 1 stack: {fq}"
    ) in listed.stderr.splitlines()
    assert emulator.api_key not in listed.stdout + listed.stderr

    # --stop with no terminal and no --yes refuses, and stops nothing.
    refused = orphans_cli(
        "--stack", stack.name, "--cwd", str(ROOT), "--stop", "--min-age", "0", env=env, cwd=ROOT
    )
    assert refused.returncode == 4, refused.stderr
    assert "standard input is not a terminal" in refused.stderr
    assert stops(emulator) == [] and {stray} | held <= active_ids(emulator)

    stopped = orphans_cli(
        "--stack", stack.name, "--cwd", str(ROOT), "--stop", "--yes", "--min-age", "0", env=env, cwd=ROOT
    )
    assert stopped.returncode == 0, stopped.stderr
    assert stops(emulator) == [f"/v1/rl/model-resources/{stray}/stop"]
    assert stray not in active_ids(emulator) and held <= active_ids(emulator)
    stack.destroy()


def test_two_real_stacks_hold_their_objects_by_default_and_only_a_true_orphan_is_stopped(
    cli_stack, emulator, emulator_server, client, tmp_path
):
    dev = cli_stack(SWEEP).init({"sessions": 1, "loraRanks": [8]})
    prod = cli_stack(SWEEP, beside=dev)  # the same backend
    prod.env = dict(dev.env)  # ... Pulumi home and create journal: one machine, one team
    prod.init({"sessions": 1, "loraRanks": [8]})
    dev.up()
    prod.up()
    devs = {r["id"] for r in dev.resources().values()}
    prods = {r["id"] for r in prod.resources().values()}
    assert len(devs) == len(prods) == 2 and not devs & prods
    gpu = next(r["id"] for r in prod.resources().values() if r["type"].endswith("ModelResource"))
    stray = client.create_training_session(TrainingSessionCreateRequest(model_resources_id=gpu)).id  # by hand
    for ident in devs | prods | {stray}:
        backdate(emulator_server, ident, hours=3)  # old enough to stop: only being held protects them
    project = "organization/together-rl-sweep"
    env = dict(dev.env)
    assert not {"TOGETHER_API_KEY", "TOGETHER_BASE_URL"} & set(env)

    # Only dev's export: prod's objects look orphaned, with the warning. (A file names no config: the key
    # comes from the environment.)
    exported = tmp_path / "dev.json"
    exported.write_text(dev.export())
    only_dev = orphans_cli(
        "--state",
        str(exported),
        env={**env, "TOGETHER_API_KEY": emulator.api_key, "TOGETHER_BASE_URL": emulator.base_url},
        cwd=tmp_path,
    )
    assert only_dev.returncode == 0, only_dev.stderr
    listed = {line.split()[2]: line for line in only_dev.stdout.splitlines() if "  " in line}
    assert prods | {stray} <= set(listed) and not devs & set(listed)
    assert "warning: only the given stack states were read" in only_dev.stderr
    for ident in prods:  # prod's creates ran on this machine: its journal names prod, which was not read
        where = f"in backend file://{os.path.realpath(dev.backend)}"
        assert (
            f"its journal entry names stack {project}/{prod.name} {where}, which was not read"
            in listed[ident]
        )

    # The default: both stacks, through the CLI, each with its config key.
    everything = orphans_cli(env=env, cwd=SWEEP)
    assert everything.returncode == 0, everything.stderr
    lines = everything.stdout.splitlines()
    assert lines[0].startswith("checked 2 stacks: ")
    assert set(lines[0].removeprefix("checked 2 stacks: ").split(", ")) == {
        f"{project}/{dev.name}",
        f"{project}/{prod.name}",
    }
    assert any(
        line.startswith(f"checked {emulator.base_url} (base URL from stack ")
        and f"with the key from stack {project}/" in line
        and "(the same key) for 2 stacks" in line
        for line in lines
    ), lines
    assert [line.split()[2] for line in lines if line.startswith("training session")] == [stray]
    assert "model resource  " not in everything.stdout
    assert "warning" not in everything.stderr

    stopped = orphans_cli("--stop", "--yes", env=env, cwd=SWEEP)
    assert stopped.returncode == 0, stopped.stderr
    assert stops(emulator) == [f"/v1/rl/training-sessions/{stray}/stop"]
    assert devs | prods <= active_ids(emulator) and stray not in active_ids(emulator)
    assert emulator.api_key not in everything.stdout + everything.stderr + stopped.stdout + stopped.stderr
    dev.destroy()
    prod.destroy()


def test_a_plugin_face_stack_holds_its_objects_and_is_read_with_its_own_config_key(
    cli_stack, emulator, client
):
    """A Pulumi YAML stack of the plugin face: its resources (together-rl:index:*) are held, its
    together-rl:apiKey and together-rl:baseUrl are the key and URL it is checked with, and --stop stops only what
    no stack holds, without asking to be told that no stack holds any Together object."""
    stack = cli_stack("sweep", face=PLUGIN).init({"sessions": 1, "loraRanks": [8]})
    stack.up()
    held = {r["id"] for r in stack.resources().values()}
    assert len(held) == 2
    stray = client.create_model_resource(ModelResourceCreateRequest(base_model=MODEL)).id
    env = dict(stack.env)
    fq = f"organization/together-rl-sweep/{stack.name}"

    listed = orphans_cli("--json", env=env, cwd=stack.project)

    assert listed.returncode == 0, listed.stderr
    assert [o["id"] for o in json.loads(listed.stdout)] == [stray]
    assert (
        f"checked {emulator.base_url} (base URL from stack {fq}'s together-rl:baseUrl) with the key from stack "
        f"{fq}'s together-rl:apiKey for 1 stack: {fq}"
    ) in listed.stderr.splitlines()
    stopped = orphans_cli("--stop", "--yes", "--min-age", "0", env=env, cwd=stack.project)
    assert stopped.returncode == 0, stopped.stderr
    assert stops(emulator) == [f"/v1/rl/model-resources/{stray}/stop"]
    assert held <= active_ids(emulator)
    assert emulator.api_key not in listed.stdout + listed.stderr + stopped.stdout + stopped.stderr
    stack.destroy()


def _kill_session(sid: int) -> None:
    """SIGKILL every process left in session ``sid`` (the test started it with ``start_new_session``)."""
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            with contextlib.suppress(OSError):
                if os.getsid(int(proc.name)) == sid:
                    os.kill(int(proc.name), signal.SIGKILL)


def test_a_pending_create_left_by_a_killed_pulumi_up_is_reported_with_the_commands_that_clear_it(
    cli_stack, emulator, tmp_path
):
    """On both faces: the plugin's resources are Together objects too, and so are its pending creates."""
    face = PLUGIN  # one face: the other's guard is a check-tier test
    emulator.control.configure(timings={"resource_pending": 8.0})
    stack = cli_stack("sweep", face=face).init({"sessions": 1, "loraRanks": [8]})
    folder = stack.project
    process = stack.popen("up", "--yes", "--skip-preview")
    try:
        wait_until(lambda: emulator.control.state()["model_resources"], 120, "the model resource create")
        time.sleep(1.0)  # inside the provider's wait for READY
        os.kill(process.pid, signal.SIGKILL)  # the `pulumi` CLI itself: its lock and pending create stay
        process.wait(timeout=30)
        wait_until(
            lambda: not provider_pids(stack.env["TOGETHER_RL_STATE_DIR"], face), 60, "the provider to exit"
        )
    finally:
        _kill_session(process.pid)  # what the killed CLI left running (its language host has its own group)
        process.communicate()
    (made,) = [o["id"] for o in emulator.control.state()["model_resources"]]
    pending = json.loads(stack.export())["deployment"]["pending_operations"]
    assert [(p["type"], p["resource"]["type"]) for p in pending] == [
        ("creating", face.token("ModelResource"))
    ]
    fq = f"organization/together-rl-sweep/{stack.name}"
    owner = fq if face.name == "dynamic" else f"-/together-rl-sweep/{stack.name}"  # the plugin is told no org
    env = dict(stack.env)

    listed = orphans_cli(env=env, cwd=folder)

    assert listed.returncode == 0, listed.stderr
    (warning,) = [line for line in listed.stderr.splitlines() if "pending operation" in line]
    cancel = f"pulumi cancel --yes --stack {fq}"
    refresh = f"pulumi refresh --clear-pending-creates --yes --stack {fq} --cwd {folder}"
    assert warning.startswith(
        f"warning: stack {fq} has 1 pending operation (creating model resource sweep-gpu)"
    )
    assert f"`{cancel}`" in warning and f"`{refresh}`" in warning
    (line,) = [line for line in listed.stdout.splitlines() if line.startswith("model resource")]
    assert line.split()[2] == made
    assert f"left by an interrupted pulumi up of {owner}/sweep-gpu at " in line
    assert "--stop leaves it running: it may be what a pending create is making" in line

    # Even told to stop whatever no stack holds, a pending create's object is left running.
    kept = orphans_cli(
        "--stop", "--yes", "--min-age", "0", "--even-if-no-stack-holds-any", env=env, cwd=folder
    )
    assert kept.returncode == 0, kept.stderr
    assert stops(emulator) == [] and made in active_ids(emulator)

    # The commands it printed clear the lock and the pending create, run from anywhere.
    for command in (cancel, refresh):
        done = subprocess.run(
            [*shlex.split(command), "--non-interactive"],
            capture_output=True,
            text=True,
            timeout=300,
            env=env,
            cwd=tmp_path,
            check=False,
        )
        assert done.returncode == 0, f"{command}: {done.stdout}\n{done.stderr}"
    assert not json.loads(stack.export())["deployment"].get("pending_operations")

    # Nothing may be creating it now, but the journal records its id for the stack's next `pulumi up`, which takes
    # it over: it is never offered for stopping, even with the stack holding no Together object.
    held = orphans_cli("--stop", "--yes", "--even-if-no-stack-holds-any", env=env, cwd=folder)
    assert held.returncode == 0, held.stderr
    (line,) = [line for line in held.stdout.splitlines() if line.startswith("model resource")]
    assert "the next `pulumi up` of that stack takes it over by it" in line
    assert stops(emulator) == []
    emulator.control.clear_requests()
    stack.up()
    posts = [
        r
        for r in emulator.control.requests()
        if r["method"] == "POST" and r["path"].endswith("model-resources")
    ]
    assert posts == [] and made in active_ids(emulator)
    stack.destroy()


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


def _orphan_docs() -> dict[str, str]:
    readme = (ROOT / "README.md").read_text()
    start = readme.index("## Nothing left billing: interrupts and the orphan finder")
    return {
        "README.md": readme[start : readme.index("\n## ", start)],
        "docs/orphans.md": (ROOT / "docs" / "orphans.md").read_text(),
    }


@pytest.mark.parametrize("doc", ["README.md", "docs/orphans.md"])
def test_the_orphan_finders_documented_commands_and_flags_exist(doc):
    text = _orphan_docs()[doc]
    sub = build_parser().parse_args(["orphans"]).parser
    known = {option for action in sub._actions for option in action.option_strings}
    commands = [
        shlex.split(line.split(" #", 1)[0])
        for block in re.findall(r"^```bash\n(.*?)^```", text, re.M | re.S)
        for line in block.splitlines()
        if "pulumi_together_rl orphans" in line
    ]
    assert commands, f"{doc} shows no orphans command"
    for words in commands:
        build_parser().parse_args(words[words.index("pulumi_together_rl") + 1 :])  # exits on a bad flag
    # Every flag the page names on its own (`--flag ...`) is one of the command's.
    named = {span.split()[0] for span in re.findall(r"`(--[a-z][^`]*)`", text)}
    assert named and named <= known, named - known


def test_a_state_that_holds_no_together_objects_or_has_pending_operations_gets_a_note(
    emulator, tmp_path, capsys
):
    state = export_of(("aws:s3/bucket:Bucket", "bucket-1"))
    state["deployment"]["pending_operations"] = [{"type": "creating", "resource": {"urn": "urn:x"}}]
    path = tmp_path / "other.json"
    path.write_text(json.dumps(state))

    code, _, err = run(capsys, "--state", str(path))

    assert code == 0
    assert "warning: the stack state read holds no Together model resource or training session" in err
    assert (
        f"warning: {path} (stack dev of project team) has 1 pending operation (creating urn:x): an update of it "
        "is running now, or one was killed"
    ) in err
