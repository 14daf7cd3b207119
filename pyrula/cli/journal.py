"""`pyrula journal ...`: inspect, diff, export, import and prune recorded exchanges."""

from __future__ import annotations

import typer

journal_app = typer.Typer(help="Inspect and manage recorded exchanges.", no_args_is_help=True)
