"""The names of the surfaces a request is fingerprinted as: decided here, used everywhere.

A surface names a provider's wire format for one kind of call. The canonicalizers stamp it on
every `Canonical`, the journal keeps it on every record, and the reply rules
(`pyrula.replies`) are looked up by it, so each name is spelled once, here.
"""

from __future__ import annotations

OPENAI_CHAT = "openai.chat"
OPENAI_RESPONSES = "openai.responses"
ANTHROPIC_MESSAGES = "anthropic.messages"
ANTHROPIC_BETA_MESSAGES = "anthropic.beta.messages"
GEMINI_GENERATE = "gemini.generate"
BEDROCK_CONVERSE = "bedrock.converse"
GENERIC = "generic"

# Anthropic's Messages API, plain or beta: one wire format for replies.
ANTHROPIC = frozenset({ANTHROPIC_MESSAGES, ANTHROPIC_BETA_MESSAGES})

ALL: tuple[str, ...] = (
    OPENAI_CHAT,
    OPENAI_RESPONSES,
    ANTHROPIC_MESSAGES,
    ANTHROPIC_BETA_MESSAGES,
    GEMINI_GENERATE,
    BEDROCK_CONVERSE,
    GENERIC,
)
