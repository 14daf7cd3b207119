"""The scrubber's fast paths mask exactly what the plain pattern and a plain search would: the
secret-shaped pattern (rewritten so the engine can skip ahead, and skipped when none of its
starts is present) against the pattern as first written, and literal secrets in a reply cut at
every chunk boundary."""

from __future__ import annotations

import random
import re

import pytest

from pyrula.journal import scrub

# The pattern as it was first written: the reference the rewritten one must agree with.
REFERENCE = re.compile(
    rb"sk-(?:ant-|proj-)?[A-Za-z0-9_\-]{16,}"
    rb"|(?:AKIA|ASIA)[0-9A-Z]{16}"
    rb"|AIza[0-9A-Za-z_\-]{30,}"
    rb"|ya29\.[0-9A-Za-z_\-.]{20,}"
    rb"|(?i:bearer)\s+[A-Za-z0-9._~+/=\-]{12,}"
    rb"|Credential=[^,\s\"]+"
    rb"|Signature=[0-9a-fA-F]{32,}"
)
PIECES = [
    b"sk-",
    b"sk-ant-",
    b"sk-proj-",
    b"AKIA",
    b"ASIA",
    b"AIza",
    b"ya29.",
    b"Bearer ",
    b"bEaReR\t",
    b"BEARER  ",
    b"Credential=",
    b"Signature=",
    b"0123456789abcdef",
    b"ABCDEFGHIJKLMNOP",
    b"xyz_-",
    b"~+/=",
    b'"',
    b",",
    b" ",
    b"\n",
    b"{",
    b"}",
    b":",
    b"\\",
    b"caf\xc3\xa9",
    b"risk-",
]


def _text(rng: random.Random) -> bytes:
    return b"".join(rng.choice(PIECES) for _ in range(rng.randrange(1, 40)))


def test_the_rewritten_pattern_masks_what_the_first_one_did():
    rng = random.Random(17)
    for _ in range(3000):
        text = _text(rng)
        expected = REFERENCE.sub(scrub.MASK.encode(), text)
        assert scrub.scrub_bytes(text, patterns=True) == expected, text


@pytest.mark.parametrize("patterns", [False, True])
def test_literal_secrets_are_masked_across_every_chunk_boundary(patterns):
    secret = b"tok-0123456789abcdef"
    again = secret + b"-" + secret
    body = b'{"echo": "' + secret + b'", "again": "' + again + b'"} sk-' + b"a" * 20
    masked = scrub.scrub_bytes(body, [secret], patterns=patterns)
    for cut in range(1, len(body)):
        for second in (cut + 1, cut + 7, len(body)):
            frames = [body[:cut], body[cut:second], body[second:]]
            scrubbed = scrub.scrub_frames(frames, [secret], patterns=patterns)
            assert b"".join(scrubbed) == masked
            assert secret not in b"".join(scrubbed)


def test_a_reply_with_nothing_to_mask_keeps_its_frames():
    frames = [b'{"text": "nothing', b' secret here"}']
    assert scrub.scrub_frames(frames, [b"tok-0123456789abcdef"], patterns=True) is frames
