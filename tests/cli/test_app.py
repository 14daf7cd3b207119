"""The `pyrula` command itself and `pyrula worker`'s start-up: version, import errors, stores."""

from __future__ import annotations

import subprocess
import sys
from importlib import metadata
from pathlib import Path

from typer.testing import CliRunner

from pyrula.cli.app import app


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


def test_ui_refuses_an_address_off_loopback_without_a_token():
    result = CliRunner().invoke(
        app, ["ui", "--listen", "0.0.0.0:8788"], env={"PYRULA_UI_TOKEN": None}
    )
    assert result.exit_code == 1
    assert "--token" in result.output


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
        [sys.executable, "-c", "from pyrula.runtime import submit; "
         f"submit('probe', store={str(store)!r})"],
        capture_output=True, text=True, cwd=tmp_path, timeout=60,
    )
    assert submitted.returncode == 0, submitted.stderr
    done = _worker("--import", "gc_app", "--store", str(store), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "seen.txt").read_text().split("\n") == [
        "import False", "run True True", "exit True", ""
    ]
