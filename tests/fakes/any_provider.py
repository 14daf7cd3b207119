"""Every provider on one port: the OpenAI, Anthropic, Gemini and Bedrock stand-ins behind one
`server.Server`, for code that finds its provider through the SDKs' usual environment (the docs'
examples run as scripts in a subprocess).

`Server(reply(turns))` serves them; `environment(server.url)` is what points each SDK there
(base URLs and fake keys). Each provider answers under its own prefix (`/openai/v1/...`,
`/anthropic/v1/...`, `/gemini/v1beta/...`; Bedrock under `/model/...`, as botocore sends it).
With `turns` (`agent_api.Turn`s) the model surfaces (chat completions, messages,
generateContent, converse) answer from that script; else each provider's default reply.
"""

from __future__ import annotations

from collections.abc import Sequence

from tests.fakes import agent_api, anthropic_api, gemini_api, openai_api
from tests.fakes.bedrock_api import ACCESS_KEY, SECRET_KEY, converse_reply
from tests.fakes.provider import TEST_KEY
from tests.fakes.server import Reply, Script, Seen, serving

PREFIXES = {"openai": "/openai", "anthropic": "/anthropic", "gemini": "/gemini"}


def environment(url: str) -> dict[str, str]:
    """The variables that send each SDK (and Pyrula's own model clients) to `url`."""
    return {
        "OPENAI_BASE_URL": f"{url}/openai/v1",
        "OPENAI_API_KEY": TEST_KEY,
        "ANTHROPIC_BASE_URL": f"{url}/anthropic",
        "ANTHROPIC_API_KEY": TEST_KEY,
        "GOOGLE_GEMINI_BASE_URL": f"{url}/gemini",
        "GEMINI_API_KEY": TEST_KEY,
        "AWS_ENDPOINT_URL_BEDROCK_RUNTIME": url,
        "AWS_ACCESS_KEY_ID": ACCESS_KEY,
        "AWS_SECRET_ACCESS_KEY": SECRET_KEY,
        "AWS_DEFAULT_REGION": "us-east-1",
    }


def _is_model_call(provider: str, path: str) -> bool:
    if provider == "openai":
        return path.startswith("/v1/chat/completions")
    if provider == "anthropic":
        return path.startswith("/v1/messages") and "/batches" not in path
    if provider == "gemini":
        return "generateContent" in path.rsplit(":", 1)[-1]
    return path.rsplit("/", 1)[-1].startswith("converse")


def reply(turns: Sequence[agent_api.Turn] = ()) -> Reply:
    """The reply function for `server.Server`: each request to its provider's stand-in."""
    defaults = {
        "openai": serving(openai_api.upstream().reply),
        "anthropic": serving(anthropic_api.upstream().reply),
        "gemini": serving(gemini_api.upstream().reply),
    }

    def answer(seen: Seen) -> Script:
        provider, path = "bedrock", seen.path
        for name, prefix in PREFIXES.items():
            if seen.path.startswith(prefix + "/"):
                provider, path = name, seen.path.removeprefix(prefix)
        inner = Seen(seen.method, path, seen.headers, seen.body)
        if turns and _is_model_call(provider, path):
            return serving(agent_api.scripted(provider, turns))(inner)
        if provider == "bedrock":
            return converse_reply()
        return defaults[provider](inner)

    return answer
