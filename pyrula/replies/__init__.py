"""Per-provider reply rules, beside `pyrula.fingerprints`' per-provider request rules.

One module per provider surface says how its streamed replies end, where its replies report
token usage, and where its stream events carry the model's text. `rules_for(surface)` finds the
rules of a surface (`pyrula.fingerprints.surfaces`). Pure functions over decoded frames and
parsed JSON: the transports frame the bytes, the runtime meters, the CLI shows text.
"""

from .rules import AWSFrame, ReplyRules, SSEFrame, Usage
from .table import RULES, rules_for

__all__ = ["RULES", "AWSFrame", "ReplyRules", "SSEFrame", "Usage", "rules_for"]
