"""Importing the client stays cheap: no pulumi, web framework, emulator or official SDK behind it."""

from __future__ import annotations

import json
import subprocess
import sys

FORBIDDEN = ("pulumi", "fastapi", "uvicorn", "starlette", "together", "pulumi_together_rl.emulator")


def loaded_after(code: str) -> dict:
    probe = (
        "import json, sys\n"
        f"{code}\n"
        f"print(json.dumps({{'forbidden': sorted(m for m in {FORBIDDEN!r} if m in sys.modules),"
        " 'httpx': 'httpx' in sys.modules}))"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def test_bare_import_loads_nothing_heavy_not_even_httpx():
    assert loaded_after("import pulumi_together_rl.client") == {"forbidden": [], "httpx": False}


def test_using_the_client_loads_httpx_but_nothing_forbidden():
    code = (
        "from pulumi_together_rl.client import TogetherRL, NotFound, ModelResourceCreateRequest, RESOURCE_GONE\n"
        "TogetherRL(api_key='k', base_url='http://127.0.0.1:9').close()"
    )
    assert loaded_after(code) == {"forbidden": [], "httpx": True}


def test_unknown_name_is_an_attribute_error():
    import pulumi_together_rl.client as client

    try:
        client.NoSuchThing  # noqa: B018
    except AttributeError as exc:
        assert "NoSuchThing" in str(exc)
    else:
        raise AssertionError("expected AttributeError")
    assert "TogetherRL" in dir(client)
