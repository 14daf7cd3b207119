"""Test legs: the suite runs once per HTTP stack the SDKs use (SDK-FACTS.md)."""

from __future__ import annotations

import nox

nox.options.sessions = ["lint", "tests", "langchain"]
nox.options.reuse_existing_virtualenvs = True

# httpx2: openai 3.x, anthropic 2.x and google-genai 3.x. httpx: openai 2.x, anthropic 0.x and
# google-genai 1.x/2.x. instructor caps jiter below what openai 3.x needs, so it is tested on the
# httpx leg only (SDK-FACTS.md).
_BOTH = ["boto3>=1.38,<2"]
STACKS = {
    "httpx2": ["openai>=3.41,<4", "anthropic>=2.3,<3", "google-genai>=3,<4", *_BOTH],
    "httpx": [
        "openai>=2.2,<3",
        "anthropic>=0.47,<1",
        "google-genai>=1.46,<3",
        "instructor>=1.17,<2",
        "jsonref>=1,<2",  # instructor's google-genai mode imports it
        *_BOTH,
    ],
}


@nox.session
@nox.parametrize("stack", list(STACKS))
def tests(session: nox.Session, stack: str) -> None:
    session.install("-e", ".[dev]", *STACKS[stack])
    session.run("pytest", "-n", "2", "-q", *session.posargs, env={"PYRULA_TEST_STACK": stack})


@nox.session
def lint(session: nox.Session) -> None:
    # mypy checks the Gemini drop-in against google-genai's own types.
    session.install("-e", ".[dev,gemini]")
    session.run("ruff", "check", ".")
    session.run("mypy", "pyrula", "fingerprints", "proxy")


# LangChain and LangGraph (issue 15): the spec's floors (langchain-core 0.3.67, langgraph 1.0.0),
# its ceilings (1.4.1, 1.2.4) and the newest releases pip resolves. langchain-openai pins the
# openai major: 0.3.27 is the last to take langchain-core 0.3.67, and it needs openai 1.x.
_LANGCHAIN_TEST_DEPS = ["pytest>=8,<10", "pytest-xdist>=3.5,<4", "hypothesis>=6.100,<7"]
_LANGCHAIN_SDKS = ["anthropic>=0.47,<1", "google-genai>=1.46,<3", "boto3>=1.38,<2"]
LANGCHAIN = {
    "floor": [
        "langchain-core==0.3.67",
        "langgraph==1.0.0",
        "langchain-openai==0.3.27",
        "openai==1.109.1",
        "langchain-anthropic==0.3.16",
    ],
    "ceiling": [
        "langchain-core==1.4.1",
        "langgraph==1.2.4",
        "langchain-openai==1.2.2",
        "openai>=2.2,<3",
        "langchain-anthropic==1.4.4",
    ],
    "newest": [
        "langchain-core<2",
        "langgraph<2",
        "langchain-openai<2",
        "openai>=2.2,<3",
        "langchain-anthropic<2",
    ],
}


@nox.session
@nox.parametrize("versions", list(LANGCHAIN))
def langchain(session: nox.Session, versions: str) -> None:
    # Installed without pyrula's `agents` extra: the floor's langchain-openai needs openai 1.x.
    session.install("-e", ".", *_LANGCHAIN_TEST_DEPS, *_LANGCHAIN_SDKS, *LANGCHAIN[versions])
    session.run("pip", "list", "--format=freeze", silent=False)
    session.run(
        "pytest", "-q", "-p", "no:randomly", "tests/agents/integrations", *session.posargs,
        env={"PYRULA_TEST_STACK": "httpx", "PYRULA_REQUIRE_LANGCHAIN": "1"},
    )
