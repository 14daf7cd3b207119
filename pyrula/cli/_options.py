"""The options every store command shares: where the store is, and machine-readable output.

Kept apart (and importing only typer) so that each command module, the light `pyrula worker`
included, takes them from one place.
"""

from __future__ import annotations

from typing import Annotated

import typer

StoreOption = Annotated[
    str | None,
    typer.Option(
        "--store",
        envvar="PYRULA_STORE",
        show_default=False,
        help="Store folder or postgresql:// URL (default: PYRULA_STORE, else ./.pyrula).",
    ),
]
JsonOption = Annotated[bool, typer.Option("--json", help="Print machine-readable JSON.")]
