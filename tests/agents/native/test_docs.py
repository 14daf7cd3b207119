"""docs/agents.md's first example runs as written, against a stand-in OpenAI on 127.0.0.1
(`OPENAI_BASE_URL`, as the openai SDK reads it)."""

from __future__ import annotations

import json
import re
from pathlib import Path

from tests.fakes.agent_api import calls, scripted, text
from tests.fakes.provider import TEST_KEY
from tests.fakes.server import Seen, Server, serving

DOC = Path(__file__).parents[3] / "docs" / "agents.md"
ANSWER = {"city": "Oslo", "temperature": 4, "advice": "bring a coat"}


def test_the_first_example_runs(monkeypatch, capsys):
    trip = serving(
        scripted(
            "openai",
            [
                calls(("weather", {"city": "Oslo"})),
                calls(("advisor", {"prompt": "Oslo at 4 degrees?"})),
                text(json.dumps(ANSWER)),
            ],
        )
    )
    advisor = serving(scripted("openai", [text("bring a coat")]))

    def reply(seen: Seen):
        system = seen.json()["messages"][0]["content"]
        return (advisor if "travel advice" in system else trip)(seen)

    example = re.findall(r"```python\n(.*?)```", DOC.read_text(), re.S)[0]
    with Server(reply) as server:
        monkeypatch.setenv("OPENAI_BASE_URL", f"{server.url}/v1")
        monkeypatch.setenv("OPENAI_API_KEY", TEST_KEY)
        exec(compile(example, str(DOC), "exec"), {"__name__": "docs_example"})
        asked = server.count()
    assert capsys.readouterr().out.strip() == str(ANSWER)
    assert asked == 4  # three turns of the trip agent, one of the advisor
