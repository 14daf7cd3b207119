"""The `pyrula` command line (typer + rich)."""
