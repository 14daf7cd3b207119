"""`pyrula.agents.compat.journaled` converts any SDK's client, through the drop-in registered
for it: the boto3 and google-genai drop-ins are imported the first time one of their clients is
converted, not before."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

pytest.importorskip("boto3")
pytest.importorskip("google.genai")

_SCRIPT = textwrap.dedent(
    """
    import sys

    import boto3
    from google import genai

    from pyrula.agents.compat import journaled

    loaded = lambda name: f"pyrula.agents.compat.{name}" in sys.modules
    before = (loaded("bedrock"), loaded("genai"))
    bedrock = boto3.client(
        "bedrock-runtime",
        region_name="us-east-1",
        aws_access_key_id="k",
        aws_secret_access_key="s",
    )
    assert journaled(bedrock) is bedrock and loaded("bedrock")
    gemini = genai.Client(api_key="k")
    assert journaled(gemini) is gemini and loaded("genai")
    print(before, type(bedrock).__module__, type(gemini).__module__)
    """
)


def test_journaled_imports_the_drop_in_registered_for_the_clients_sdk() -> None:
    done = subprocess.run(
        [sys.executable, "-c", _SCRIPT], capture_output=True, text=True, timeout=120
    )

    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == [
        "(False,",
        "False)",
        "botocore.client",
        "pyrula.agents.compat.genai",
    ]
