"""The plugin's executable (`pulumi-resource-together-rl`, sh) picks the Python that gets the user's API key: these
run the real launcher on real folders (real venvs, planted interpreters) and look at which Python ran.

Each plugin folder here holds a copy of the launcher and a probe `__main__.py` that records which Python ran it;
a planted interpreter is an executable that leaves a marker file when anything runs it.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

PLUGIN_DIR = Path(__file__).resolve().parents[2] / "provider" / "pulumi_together_rl" / "plugin"
LAUNCHER = PLUGIN_DIR / "pulumi-resource-together-rl"
PYTHON_VERSION = f"python{sys.version_info.major}.{sys.version_info.minor}"
PROBE = """\
import json, os, sys
with open(os.environ["PROBE_OUT"], "w") as out:
    json.dump({"prefix": sys.prefix, "executable": sys.executable, "argv": sys.argv[1:]}, out)
"""
NOBODY = 65534


def _plugin_folder(folder: Path) -> Path:
    folder.mkdir(parents=True)
    shutil.copy2(LAUNCHER, folder / LAUNCHER.name)
    (folder / "__main__.py").write_text(PROBE)
    return folder / LAUNCHER.name


def _checkout(root: Path, *, venv: bool = True) -> Path:
    """A source checkout at `root` (its pyproject.toml, the plugin folder, a real .venv); returns the launcher."""
    launcher = _plugin_folder(root / "provider" / "pulumi_together_rl" / "plugin")
    (root / "pyproject.toml").write_text('[project]\nname = "pulumi-together-rl"\n')
    if venv:
        _venv(root / ".venv")
    return launcher


def _venv(where: Path) -> Path:
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(where)], check=True)
    return where


def _installed(venv: Path) -> Path:
    """The plugin folder where pip puts it in `venv`; returns the launcher."""
    return _plugin_folder(venv / "lib" / PYTHON_VERSION / "site-packages" / "pulumi_together_rl" / "plugin")


def _plant(where: Path, marker: Path) -> None:
    """An interpreter someone else left at `where`: running it leaves `marker`."""
    where.parent.mkdir(parents=True, exist_ok=True)
    where.write_text(f"#!/bin/sh\necho ran >> '{marker}'\n")
    where.chmod(0o755)


def _launch(
    launcher: Path, tmp_path: Path, **env: str
) -> tuple[subprocess.CompletedProcess[str], dict | None]:
    """Runs the launcher the way the engine does (the engine's address as its argument); returns what the probe
    recorded, None if no Python of ours ran it."""
    out = tmp_path / "probe.json"
    out.unlink(missing_ok=True)
    environ = {k: v for k, v in os.environ.items() if k != "TOGETHER_RL_PLUGIN_PYTHON"}
    done = subprocess.run(
        [str(launcher), "127.0.0.1:50051"],
        env={**environ, "PROBE_OUT": str(out), **env},
        capture_output=True,
        text=True,
        timeout=30,
    )
    return done, (json.loads(out.read_text()) if out.exists() else None)


def test_a_clone_in_a_shared_folder_runs_its_own_venv_never_a_python_planted_above_it(tmp_path):
    # <tmp>/x/repo: five folders above the plugin is <tmp>, where another user planted bin/python.
    marker = tmp_path / "planted-python-ran"
    _plant(tmp_path / "bin" / "python", marker)
    launcher = _checkout(tmp_path / "x" / "repo")

    done, probe = _launch(launcher, tmp_path)

    assert done.returncode == 0, done.stderr
    assert not marker.exists()
    assert probe == {
        "prefix": str(tmp_path / "x" / "repo" / ".venv"),
        "executable": str(tmp_path / "x" / "repo" / ".venv" / "bin" / "python"),
        "argv": ["127.0.0.1:50051"],
    }


def test_a_clone_without_a_venv_runs_python3_on_path_never_a_venv_or_python_above_it(tmp_path):
    marker = tmp_path / "planted-python-ran"
    _plant(tmp_path / "bin" / "python", marker)
    for above in (tmp_path / ".venv", tmp_path / "x" / ".venv"):
        _plant(above / "bin" / "python", marker)
    launcher = _checkout(tmp_path / "x" / "repo", venv=False)
    path_dir = tmp_path / "on-path"
    path_dir.mkdir()
    (path_dir / "python3").symlink_to(Path(sys.executable).resolve())

    done, probe = _launch(launcher, tmp_path, PATH=f"{path_dir}:/usr/bin:/bin")

    assert done.returncode == 0, done.stderr
    assert not marker.exists()
    assert probe is not None and probe["executable"] == str(path_dir / "python3")


def test_a_folder_shaped_like_a_checkout_without_its_pyproject_is_no_checkout(tmp_path):
    marker = tmp_path / "planted-python-ran"
    launcher = _checkout(tmp_path / "x" / "repo", venv=False)
    (tmp_path / "x" / "repo" / "pyproject.toml").unlink()
    _plant(tmp_path / "x" / "repo" / ".venv" / "bin" / "python", marker)

    done, probe = _launch(launcher, tmp_path)

    assert done.returncode == 0, done.stderr
    assert not marker.exists()
    assert probe is not None and probe["prefix"] != str(tmp_path / "x" / "repo" / ".venv")


def test_a_venv_install_runs_the_python_of_that_venv(tmp_path):
    venv = _venv(tmp_path / "venv")
    launcher = _installed(venv)

    done, probe = _launch(launcher, tmp_path)

    assert done.returncode == 0, done.stderr
    assert probe is not None and probe["prefix"] == str(venv)
    assert probe["executable"] == str(venv / "bin" / "python")


def test_a_venv_shaped_folder_without_pyvenv_cfg_is_no_venv(tmp_path):
    # `pip install --user` (~/.local/lib/pythonX.Y/site-packages) has the shape but is no venv: python3 runs it.
    marker = tmp_path / "planted-python-ran"
    prefix = tmp_path / "prefix"
    _plant(prefix / "bin" / "python", marker)
    launcher = _installed(prefix)

    done, probe = _launch(launcher, tmp_path)

    assert done.returncode == 0, done.stderr
    assert not marker.exists()
    assert probe is not None and probe["prefix"] != str(prefix)


def _python3_on_path(tmp_path: Path) -> str:
    """A PATH whose python3 is this test run's Python: what the launcher runs when no venv is the plugin's own."""
    path_dir = tmp_path / "on-path"
    path_dir.mkdir(exist_ok=True)
    if not (path_dir / "python3").exists():
        (path_dir / "python3").symlink_to(Path(sys.executable).resolve())
    return f"{path_dir}:/usr/bin:/bin"


@pytest.mark.parametrize(
    "plugin_under",
    [
        "lib/python/site-packages",  # no version: no venv lays out its lib so
        "lib/pythonX/site-packages",
        f"lib/{PYTHON_VERSION}/vendored/site-packages",  # a site-packages inside another package's folder
        f"lib/{PYTHON_VERSION}/site-packages/other/lib/{PYTHON_VERSION}/site-packages",
    ],
)
def test_a_plugin_folder_not_exactly_where_its_venv_puts_it_never_runs_the_python_above(
    tmp_path, plugin_under
):
    # A folder with a pyvenv.cfg and an interpreter of the user's own, and a plugin folder below it that is not its
    # lib/pythonX.Y/site-packages/pulumi_together_rl/plugin: that python is not the plugin's, python3 runs it.
    marker = tmp_path / "planted-python-ran"
    prefix = tmp_path / "prefix"
    _plant(prefix / "bin" / "python", marker)
    (prefix / "pyvenv.cfg").write_text("home = /usr/bin\n")
    launcher = _plugin_folder(prefix / plugin_under / "pulumi_together_rl" / "plugin")
    inner = prefix / f"lib/{PYTHON_VERSION}/site-packages/other"
    if plugin_under.endswith(f"other/lib/{PYTHON_VERSION}/site-packages"):
        _plant(inner / "bin" / "python", marker)  # no pyvenv.cfg: the folder right above is no venv either

    done, probe = _launch(launcher, tmp_path, PATH=_python3_on_path(tmp_path))

    assert done.returncode == 0, done.stderr
    assert not marker.exists()
    assert probe is not None and probe["executable"] == str(tmp_path / "on-path" / "python3")


def test_a_venv_install_with_no_python_in_its_bin_runs_python3_rather_than_refusing(tmp_path):
    venv = _venv(tmp_path / "venv")
    launcher = _installed(venv)
    (venv / "bin" / "python").unlink()

    done, probe = _launch(launcher, tmp_path, PATH=_python3_on_path(tmp_path))

    assert done.returncode == 0, done.stderr
    assert probe is not None and probe["executable"] == str(tmp_path / "on-path" / "python3")


def test_a_checkouts_dot_venv_without_pyvenv_cfg_is_no_venv(tmp_path):
    # A folder named .venv with a bin/python is not a venv without its pyvenv.cfg: nothing made it one.
    marker = tmp_path / "planted-python-ran"
    launcher = _checkout(tmp_path / "x" / "repo", venv=False)
    _plant(tmp_path / "x" / "repo" / ".venv" / "bin" / "python", marker)

    done, probe = _launch(launcher, tmp_path, PATH=_python3_on_path(tmp_path))

    assert done.returncode == 0, done.stderr
    assert not marker.exists()
    assert probe is not None and probe["executable"] == str(tmp_path / "on-path" / "python3")


def _make_writable_by_others(venv: Path, what: str) -> None:
    target = venv / what
    target.chmod(target.stat().st_mode | (0o002 if what == "." else 0o020))


def _give_to_nobody(venv: Path, what: str) -> None:
    os.chown(venv / what, NOBODY, NOBODY)


@pytest.mark.parametrize("layout", ["installed", "checkout"])
@pytest.mark.parametrize(
    ("spoil", "what", "cause"),
    [
        (_make_writable_by_others, ".", "is writable by others than its owner"),
        (_make_writable_by_others, "bin", "is writable by others than its owner"),
        (_give_to_nobody, ".", f"belongs to another user (uid {NOBODY})"),
        (_give_to_nobody, "bin", f"belongs to another user (uid {NOBODY})"),
        # Its `home` names where the standard library is taken from: whoever writes it chooses the code that runs.
        (_make_writable_by_others, "pyvenv.cfg", "is writable by others than its owner"),
        (_give_to_nobody, "pyvenv.cfg", f"belongs to another user (uid {NOBODY})"),
    ],
    ids=[
        "world-writable-venv",
        "group-writable-bin",
        "venv-of-nobody",
        "bin-of-nobody",
        "group-writable-pyvenv-cfg",
        "pyvenv-cfg-of-nobody",
    ],
)
def test_a_venv_others_can_write_or_own_is_refused_in_one_line(tmp_path, layout, spoil, what, cause):
    if os.geteuid() != 0 and spoil is _give_to_nobody:
        pytest.fail("giving a folder to another user needs root (CI and the dev machines run as root)")
    if layout == "installed":
        venv = _venv(tmp_path / "venv")
        launcher = _installed(venv)
    else:
        launcher = _checkout(tmp_path / "repo")
        venv = tmp_path / "repo" / ".venv"
    spoil(venv, what)

    done, probe = _launch(launcher, tmp_path)

    assert done.returncode == 1
    assert probe is None  # no Python ran, not even python3 on PATH
    path = str(venv) if what == "." else str(venv / what)
    assert done.stderr == (
        f"starting the together-rl plugin ({venv}): refused its Python, {path} {cause}. Make the venv, its bin, its "
        "pyvenv.cfg and its python yours and writable only by you (chown, chmod go-w), or set "
        "TOGETHER_RL_PLUGIN_PYTHON to the Python to run.\n"
    )


def test_an_interpreter_of_another_user_is_refused(tmp_path):
    # The venv's python is a file of nobody's, not a link to the system's: what runs is what is checked.
    venv = _venv(tmp_path / "venv")
    launcher = _installed(venv)
    python = venv / "bin" / "python"
    python.unlink()
    shutil.copy2(Path(sys.executable).resolve(), python)
    os.chown(python, NOBODY, NOBODY)

    done, probe = _launch(launcher, tmp_path)

    assert done.returncode == 1 and probe is None
    assert f"{python} belongs to another user (uid {NOBODY})" in done.stderr


def test_the_python_the_user_names_wins_over_any_venv(tmp_path):
    venv = _venv(tmp_path / "venv")
    launcher = _installed(venv)
    _make_writable_by_others(venv, ".")  # would be refused; the named Python is the user's own choice
    chosen = _venv(tmp_path / "chosen")

    done, probe = _launch(launcher, tmp_path, TOGETHER_RL_PLUGIN_PYTHON=str(chosen / "bin" / "python"))

    assert done.returncode == 0, done.stderr
    assert probe is not None and probe["prefix"] == str(chosen)
