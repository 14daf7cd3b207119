"""OpenAI-compatible providers: other services that speak OpenAI's chat (and responses) API.

Their requests are OpenAI's, so they are fingerprinted as `openai.chat` (or `openai.responses`)
with the same compared fields; the provider's name goes into `meta["provider"]`, which is kept
for display and never compared. A provider is recognised by the host it is called on, or, for a
model server on this machine, by its usual local port.

Adding a provider is one row here, one row in `pyrula.replies.openai_compatible` and one proxy
route (`proxy/routes.py`).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from ._url import split_url


@dataclass(frozen=True, slots=True)
class Compatible:
    """One OpenAI-compatible provider and how its requests are told apart."""

    name: str  # as recorded in `meta["provider"]` and shown by `pyrula journal ls`
    hosts: tuple[str, ...] = ()  # exact API host names
    local_ports: tuple[int, ...] = ()  # its default port on a loopback host (a local server)


MISTRAL = "mistral"
GROQ = "groq"
XAI = "xai"
DEEPSEEK = "deepseek"
OPENROUTER = "openrouter"
TOGETHER = "together"
OLLAMA = "ollama"
VLLM = "vllm"

PROVIDERS: tuple[Compatible, ...] = (
    Compatible(MISTRAL, hosts=("api.mistral.ai", "codestral.mistral.ai")),
    Compatible(GROQ, hosts=("api.groq.com",)),
    Compatible(XAI, hosts=("api.x.ai",)),
    Compatible(DEEPSEEK, hosts=("api.deepseek.com",)),
    Compatible(OPENROUTER, hosts=("openrouter.ai",)),
    Compatible(TOGETHER, hosts=("api.together.xyz", "api.together.ai")),
    Compatible(OLLAMA, local_ports=(11434,)),
    Compatible(VLLM, local_ports=(8000,)),
)

_LOOPBACK = frozenset({"localhost", "127.0.0.1", "[::1]"})
_BY_HOST = {host: provider.name for provider in PROVIDERS for host in provider.hosts}
_BY_PORT = {port: provider.name for provider in PROVIDERS for port in provider.local_ports}


@lru_cache(maxsize=256)
def provider_of(url: str) -> str | None:
    """The OpenAI-compatible provider a request URL is addressed to, or None (OpenAI itself,
    Azure, or a host no row names: those are plain OpenAI calls)."""
    name, port = _host_and_port(split_url(url).host)
    if name in _BY_HOST:
        return _BY_HOST[name]
    if name in _LOOPBACK and port.isdigit():
        return _BY_PORT.get(int(port))
    return None


def _host_and_port(host: str) -> tuple[str, str]:
    """`api.groq.com` -> (`api.groq.com`, ""); `[::1]:8000` -> (`[::1]`, `8000`)."""
    if host.startswith("["):
        end = host.find("]") + 1
        return host[:end], host[end + 1 :] if host[end : end + 1] == ":" else ""
    name, _, port = host.partition(":")
    return name, port
