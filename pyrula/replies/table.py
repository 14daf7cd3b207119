"""Which reply rules read a reply: one row per surface, the generic rules for anything else."""

from __future__ import annotations

from types import MappingProxyType

from . import anthropic_messages, bedrock_converse, gemini, generic, openai_chat, openai_responses
from .rules import ReplyRules

_ROWS = (
    openai_chat.RULES,
    openai_responses.RULES,
    anthropic_messages.RULES,
    anthropic_messages.BETA_RULES,
    gemini.RULES,
    bedrock_converse.RULES,
    generic.RULES,
)
RULES = MappingProxyType({rules.surface: rules for rules in _ROWS})


def rules_for(surface: str) -> ReplyRules:
    """The rules of `surface`; the generic ones for a surface no row names (or "")."""
    return RULES.get(surface, generic.RULES)
