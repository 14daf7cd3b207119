"""Errors the proxy raises; they live in `pyrula.errors` with every other. Each message names the
fix."""

from __future__ import annotations

from pyrula.errors import ConfigError, ProxyError

__all__ = ["ConfigError", "ProxyError"]
