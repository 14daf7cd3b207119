"""`pyrula ui`: a local, read-mostly web page over a store (exchanges, runs, their timelines).

Starlette under uvicorn, Jinja2 templates rendered on the server, htmx (vendored in `static/`)
for the little that updates in place. Install it with the `ui` extra: `pip install 'pyrula[ui]'`.
"""

from pyrula.ui.app import create_app
from pyrula.ui.serve import UIConfig, serve

__all__ = ["UIConfig", "create_app", "serve"]
