"""Importing one drop-in imports one SDK; a missing SDK names the extra that brings it."""

from __future__ import annotations

import json
import subprocess
import sys


def _python(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)


def test_the_openai_drop_in_does_not_import_anthropic():
    done = _python(
        "import sys, pyrula.agents.compat.openai\n"
        "from pyrula.agents.compat import AsyncOpenAI\n"
        "print(sorted(m for m in ('anthropic', 'google.genai', 'boto3') if m in sys.modules))"
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_journaled_finds_the_drop_in_of_a_client_it_was_not_imported_for():
    done = _python(
        "import anthropic\n"
        "from pyrula.agents.compat import journaled\n"
        "client = journaled(anthropic.Anthropic(api_key='sk-ant-unused'))\n"
        "print(type(client).__module__)"
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "pyrula.agents.compat.anthropic"


def test_a_missing_sdk_names_the_extra_to_install():
    done = _python(
        "import sys\n"
        "sys.modules['botocore'] = None  # as if boto3 were not installed\n"
        "from pyrula.agents.compat import bedrock\n"
    )
    assert done.returncode == 1
    assert "pip install 'pyrula[agents,bedrock]'" in done.stderr
    assert "botocore" in done.stderr


def test_importing_the_bedrock_module_without_boto3_names_the_extra():
    done = _python(
        "import sys\nsys.modules['botocore'] = None\nimport pyrula.agents.compat.bedrock\n"
    )
    assert done.returncode == 1
    assert "pip install 'pyrula[agents,bedrock]'" in done.stderr


def test_the_openai_drop_in_loads_nothing_the_sdk_itself_does_not():
    # Issue 17: the drop-in's import (and a worker's start) paid for anthropic, httpx (with its
    # CLI's rich and pygments) and the native agents. It may add Pyrula's own core and LMDB only.
    done = _python(
        "import json, sys\n"
        "import openai\n"
        "before = set(sys.modules)\n"
        "from pyrula.agents.compat.openai import AsyncOpenAI\n"
        "AsyncOpenAI(api_key='sk-unused')\n"
        "added = set(sys.modules) - before\n"
        "print(json.dumps(sorted(added)))"
    )
    assert done.returncode == 0, done.stderr
    added = set(json.loads(done.stdout))
    packages = {m.split(".")[0] for m in added}
    foreign = {
        "anthropic",
        "google",
        "boto3",
        "botocore",
        "httpx",
        "httpx2",
        "rich",
        "typer",
        "click",
        "pygments",
        "mcp",
        "pydantic_ai",
        "langchain_core",
    }
    assert packages & foreign == set()
    assert not any(m.startswith(("pyrula.agents.native", "pyrula.agents.llm")) for m in added)
    # Nor the runs' machinery: the worker, the run client and store, an attempt's session (it
    # loads when a run is submitted or a worker starts, not with a client class).
    runs = {
        "pyrula.runtime.worker",
        "pyrula.runtime.client",
        "pyrula.runtime.runstore",
        "pyrula.runtime.attempt",
        "pyrula.runtime.session",
        "pyrula.runtime.registry",
        "pyrula.runtime.context",
        "pyrula.journal.group_commit",
    }
    assert added & runs == set()


def test_the_runtime_names_load_on_first_use_and_are_the_modules_own():
    done = _python(
        "import sys\n"
        "import pyrula.runtime, pyrula.agents\n"
        "print('pyrula.runtime.worker' in sys.modules)\n"
        "from pyrula.runtime import Worker, submit, workflow\n"
        "from pyrula.runtime.worker import Worker as Home\n"
        "from pyrula.agents import AgentContext, tool\n"
        "from pyrula.runtime.context import AgentContext as ContextHome\n"
        "print(Worker is Home, AgentContext is ContextHome, callable(submit), callable(tool))\n"
        "print(sorted(set(pyrula.runtime.__all__) - set(dir(pyrula.runtime))))"
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split("\n")[:3] == ["False", "True True True True", "[]"]


def test_the_transport_stack_loads_with_the_first_client_not_with_the_drop_in():
    # Issue 17: `pyrula.runtime.calls` and the guard imported the fingerprints, the journal, the
    # reply rules and the transport core (and `import pyrula` the cassettes) with every drop-in.
    done = _python(
        "import sys\n"
        "stack = ('pyrula.fingerprints', 'pyrula.journal', 'pyrula.replies', 'pyrula.transport',\n"
        "         'pyrula.cassette', 'pyrula.runtime.metering')\n"
        "def loaded():\n"
        "    return sorted(m for m in stack if m in sys.modules)\n"
        "from pyrula.agents.compat.openai import AsyncOpenAI\n"
        "print(loaded())\n"
        "AsyncOpenAI(api_key='sk-unused')\n"
        "print('pyrula.transport.core' in sys.modules, 'pyrula.cassette' in sys.modules)\n"
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split("\n")[:2] == ["[]", "True False"]


def test_pyrula_cassette_is_the_function_whichever_is_imported_first():
    done = _python(
        "import sys, pyrula\n"
        "print('pyrula.cassette' in sys.modules)\n"
        "from pyrula.cassette import Cassette\n"
        "import pyrula.cassette\n"
        "print(callable(pyrula.cassette), pyrula.cassette.__name__, pyrula.Cassette is Cassette)\n"
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split("\n")[:2] == ["False", "True cassette True"]
