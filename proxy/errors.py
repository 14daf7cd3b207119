"""Every error the proxy raises, in one place. Each message names the fix."""

from __future__ import annotations

from pyrula.errors import PyrulaError


class ProxyError(PyrulaError):
    """The proxy could not start or keep serving."""


class ConfigError(ProxyError):
    """A proxy option is invalid or unsafe."""
