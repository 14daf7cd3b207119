"""What `pyrula worker --import tests.agents.mcp.worker_app` imports: the served tools,
registered as the workflows a server submits (as a module that builds the server would)."""

from pyrula.agents.mcp import register_tools
from tests.agents.mcp.tools_app import tools

register_tools(tools)
