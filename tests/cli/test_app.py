"""The `pyrula` command itself and `pyrula worker`'s start-up: version, import errors, stores."""

from __future__ import annotations

import re
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import httpx
import pytest
from typer.testing import CliRunner

from pyrula.cli.app import app
from pyrula.journal.store import Store
from tests.fakes.clock import wait_until


def test_version_prints_the_installed_version():
    result = CliRunner().invoke(app, ["--version"])
    assert result.exit_code == 0
    assert result.output.strip() == f"pyrula {metadata.version('pyrula')}"


def _worker(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pyrula.cli.app", "worker", *args, "--until-idle"],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=60,
    )


def test_worker_names_a_module_it_cannot_import_in_one_line(tmp_path):
    done = _worker("--import", "nosuchmodule", "--store", str(tmp_path / "s"), cwd=tmp_path)
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert lines == [
        "pyrula worker: cannot import 'nosuchmodule': ModuleNotFoundError: "
        "No module named 'nosuchmodule'"
    ]
    assert "Traceback" not in done.stderr


def test_worker_reports_the_error_raised_inside_a_user_module(tmp_path):
    (tmp_path / "broken_app.py").write_text("x = 1\nraise RuntimeError('no key set')\n")
    done = _worker("--import", "broken_app", "--store", str(tmp_path / "s"), cwd=tmp_path)
    assert done.returncode == 2
    assert "cannot import 'broken_app': RuntimeError: no key set" in done.stderr
    assert "broken_app.py:2" in done.stderr
    assert "Traceback" not in done.stderr


def test_worker_refuses_a_store_path_that_does_not_exist(tmp_path):
    (tmp_path / "app.py").write_text("")
    missing = tmp_path / "typo-store"
    done = _worker("--import", "app", "--store", str(missing), cwd=tmp_path)
    assert done.returncode == 1
    assert f"no Pyrula store at {missing}" in done.stderr
    assert not missing.exists()

    made = _worker("--import", "app", "--store", str(missing), "--create", cwd=tmp_path)
    assert made.returncode == 0, made.stderr
    assert (missing / "data.mdb").exists()


@pytest.mark.parametrize(
    "where",
    [
        ["--listen", "0.0.0.0:8788"],
        ["--host", "0.0.0.0"],
        ["--listen", "0.0.0.0:1", "--host", "0.0.0.0"],
    ],
)
def test_ui_refuses_an_address_off_loopback_without_a_token(where):
    result = CliRunner().invoke(app, ["ui", *where], env={"PYRULA_UI_TOKEN": None})
    assert result.exit_code == 1
    assert "--token" in result.output


def test_ui_refuses_a_host_or_port_that_contradicts_listen():
    clash = ["ui", "--listen", "127.0.0.1:8788", "--port", "18900"]
    result = CliRunner().invoke(app, clash, env={"COLUMNS": "200"})
    assert result.exit_code == 2
    assert "--port 18900 and --listen 127.0.0.1:8788 name different addresses" in result.output
    assert "--listen HOST:PORT, or --host HOST --port PORT" in result.output


def test_ui_listens_on_the_port_given_with_port(tmp_path):
    Store(tmp_path / "s").close()
    out = tmp_path / "out.txt"
    command = [sys.executable, "-m", "pyrula.cli.app", "ui", "--store", str(tmp_path / "s")]
    with out.open("w") as stdout:
        page = subprocess.Popen(
            [*command, "--host", "127.0.0.1", "--port", "0"], stdout=stdout, stderr=stdout
        )
    try:
        wait_until(lambda: "pyrula ui:" in out.read_text(), "the page to listen")
        address = re.search(r"pyrula ui: (http://127\.0\.0\.1:(\d+)/)", out.read_text())
        assert address is not None, out.read_text()
        assert address.group(2) != "8788"  # --port 0: a port the system chose, not the default
        assert httpx.get(address.group(1), timeout=30, follow_redirects=True).status_code == 200
    finally:
        page.terminate()
        page.wait(30)


def test_the_demo_refuses_a_postgresql_store_and_names_what_to_use(tmp_path):
    result = CliRunner().invoke(
        app, ["demo", "--store", "postgresql://me@db.internal/pyrula"], env={"COLUMNS": "200"}
    )

    assert result.exit_code == 2
    assert "runs on a folder store only" in result.output
    assert "docs/scaling.md" in result.output


def test_a_worker_starts_without_the_other_commands_rich_or_httpx(tmp_path):
    # Issue 17: a worker's start imported every command, rich and httpx before claiming a run,
    # and the run client (`submit`, `answer`, ...) with `pyrula.runtime`; and an attempt's
    # session, the transport core and the reply rules, which load with its first run.
    store = tmp_path / "s"
    code = (
        "import runpy, sys\n"
        f"sys.argv = ['pyrula', 'worker', '--import', 'json', '--store', {str(store)!r},\n"
        "            '--create', '--until-idle', '--quiet']\n"
        "try:\n"
        "    runpy.run_module('pyrula.cli.app', run_name='__main__')\n"
        "except SystemExit as stop:\n"
        "    assert not stop.code, stop.code\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('rich', 'httpx')\n"
        "             or m in ('pyrula.cli.journal', 'pyrula.cli.runs', 'pyrula.cli.proxy',\n"
        "                      'pyrula.runtime.client', 'pyrula.runtime.session',\n"
        "                      'pyrula.transport.core', 'pyrula.replies')))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"
    assert (store / "data.mdb").exists()  # it did start, on the store it was given


def test_a_worker_freezes_what_its_modules_made_and_skips_the_exit_collections(tmp_path):
    # Issue 17: the collector's passes over an SDK's objects while they import, after, and over
    # every object at the interpreter's exit, were a tenth of a worker's start-and-exit. The
    # imported objects are frozen; the workflow runs with the collector on; atexit still runs.
    (tmp_path / "gc_app.py").write_text(
        "import atexit, gc, pathlib\n"
        "from pyrula.runtime import workflow\n"
        "out = pathlib.Path('seen.txt')\n"
        "out.write_text(f'import {gc.isenabled()}\\n')\n"
        "atexit.register(lambda: out.open('a').write(f'exit {gc.get_freeze_count() > 0}\\n'))\n"
        "@workflow\n"
        "async def probe(ctx):\n"
        "    out.open('a').write(f'run {gc.isenabled()} {gc.get_freeze_count() > 0}\\n')\n"
    )
    store = tmp_path / "s"
    submitted = subprocess.run(
        [
            sys.executable,
            "-c",
            f"from pyrula.runtime import submit; submit('probe', store={str(store)!r})",
        ],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=60,
    )
    assert submitted.returncode == 0, submitted.stderr
    done = _worker("--import", "gc_app", "--store", str(store), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "seen.txt").read_text().split("\n") == [
        "import False",
        "run True True",
        "exit True",
        "",
    ]


TOOLS_APP = """
from pyrula.runtime import tool

@tool
async def charge_card(amount: int) -> str:
    return f"charged {amount}"

@tool
def refund(amount: int) -> str:
    return f"refunded {amount}"
"""


@pytest.mark.parametrize(
    ("tail", "command"),
    [
        ("TOOLS = [charge_card, refund]\n", "pyrula mcp worker --import tools_app:TOOLS"),
        ("del refund\n", "pyrula mcp worker --import tools_app:charge_card"),
        (
            "",  # two tools and no list of them: the command says what the list must hold
            "pyrula mcp worker --import tools_app:TOOLS, TOOLS being a list of its tools "
            "(charge_card, refund)",
        ),
    ],
    ids=["a list", "one tool", "no list"],
)
def test_a_worker_importing_only_mcp_tools_names_the_mcp_worker_command(tmp_path, tail, command):
    (tmp_path / "tools_app.py").write_text(TOOLS_APP + tail)
    store = str(tmp_path / "s")
    done = _worker("--import", "tools_app", "--store", store, "--create", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "this worker claims no run" in done.stderr
    assert f"to execute MCP tool calls, run {command}" in done.stderr
    if tail:  # what it names is a command that runs them
        suggested = command.split()[1:]
        served = subprocess.run(
            [sys.executable, "-m", "pyrula.cli.app", *suggested, "--store", store, "--until-idle"],
            capture_output=True,
            text=True,
            cwd=tmp_path,
            timeout=60,
        )
        assert served.returncode == 0, served.stderr
        assert "mcp.tool:charge_card" in served.stderr and "no workflow" not in served.stderr


def test_a_worker_importing_no_workflow_and_no_tool_says_to_pass_the_module(tmp_path):
    (tmp_path / "empty_app.py").write_text("")
    store = str(tmp_path / "s")
    done = _worker("--import", "empty_app", "--store", store, "--create", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "claims no run; pass --import with the module that defines them" in done.stderr
    assert "mcp worker" not in done.stderr
