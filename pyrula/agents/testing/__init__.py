"""Helpers for testing agents and workflows in-process."""
