"""`pyrula journal ...` against stores recorded from real OpenAI SDK calls."""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

import pyrula
from tests.cli.support import SECRET, STORY, Invoke, Provider, ask, ask_streamed, make_client
from tests.fakes.postgres import fresh_url


def ls(journal: Invoke, store: Path, *args: str) -> list[dict[str, Any]]:
    result = journal("ls", "--store", str(store), "--json", *args)
    assert result.exit_code == 0, result.output
    rows: list[dict[str, Any]] = json.loads(result.stdout)
    return rows


def ids_by_question(journal: Invoke, store: Path) -> dict[str, str]:
    """Each recorded exchange's id, keyed by the question its request asked."""
    found = {}
    for row in ls(journal, store):
        shown = journal("show", row["id"], "--store", str(store), "--json")
        request = json.loads(shown.stdout)["request"]
        found[request["compared"]["messages"][0]["content"]] = row["id"]
    return found


def export(journal: Invoke, store: Path, *args: str) -> str:
    result = journal("export", "--store", str(store), *args)
    assert result.exit_code == 0, result.output
    return result.stdout


# -- ls ------------------------------------------------------------------------------------------


def test_ls_lists_one_row_per_recorded_exchange(journal: Invoke, store: Path) -> None:
    rows = ls(journal, store)

    assert sorted((r["namespace"], r["streamed"]) for r in rows) == [
        ("chat", False),
        ("chat", False),
        ("chat-stream", True),
        ("chat-stream", True),
    ]
    assert {r["surface"] for r in rows} == {"openai.chat"}
    assert all(r["method"] == "POST" and r["status"] == 200 for r in rows)
    assert all(len(r["id"]) == 32 and r["url"].endswith("/chat/completions") for r in rows)
    table = journal("ls", "--store", str(store))
    assert table.exit_code == 0
    for row in rows:
        assert row["id"][:12] in table.stdout
    assert "POST /v1/chat/completions" in table.stdout


def test_ls_filters_by_cassette_prefix_and_surface(journal: Invoke, store: Path) -> None:
    assert {r["namespace"] for r in ls(journal, store, "chat-")} == {"chat-stream"}
    assert len(ls(journal, store, "chat")) == 4  # a prefix of both names
    assert ls(journal, store, "nope") == []
    assert ls(journal, store, "--surface", "anthropic.messages") == []
    assert len(ls(journal, store, "--surface", "openai.chat")) == 4


def test_ls_reads_the_store_named_by_pyrula_store(journal: Invoke, store: Path) -> None:
    from typer.testing import CliRunner

    from pyrula.cli.app import app

    result = CliRunner().invoke(app, ["journal", "ls", "--json"], env={"PYRULA_STORE": str(store)})

    assert result.exit_code == 0, result.output
    assert len(json.loads(result.stdout)) == 4


# -- show ----------------------------------------------------------------------------------------


def test_show_prints_a_streamed_reply_as_its_reassembled_text(journal: Invoke, store: Path) -> None:
    record_id = ids_by_question(journal, store)["Tell a story"]

    result = journal("show", record_id[:10], "--store", str(store))

    assert result.exit_code == 0, result.output
    assert STORY in result.stdout
    assert "data:" not in result.stdout  # the text, not the events
    assert '"Tell a story"' in result.stdout  # the request document


def test_show_json_carries_text_events_and_request(journal: Invoke, store: Path) -> None:
    record_id = ids_by_question(journal, store)["Tell a story"]

    shown = json.loads(journal("show", record_id, "--store", str(store), "--json").stdout)

    assert shown["id"] == record_id
    assert shown["reply"]["text"] == STORY
    assert shown["reply"]["events"][-1]["data"] == "[DONE]"
    assert shown["request"]["compared"]["stream"] is True


def test_show_raw_prints_the_frames_as_recorded(journal: Invoke, store: Path) -> None:
    record_id = ids_by_question(journal, store)["Tell a story"]

    result = journal("show", record_id, "--raw", "--store", str(store))

    assert result.exit_code == 0, result.output
    assert "data: [DONE]" in result.stdout
    assert "frame 0" in result.stdout


def test_show_prints_a_plain_reply_body(journal: Invoke, store: Path) -> None:
    record_id = ids_by_question(journal, store)["Ping?"]

    result = journal("show", record_id, "--store", str(store))

    assert result.exit_code == 0, result.output
    assert "Answer to Ping?" in result.stdout
    assert "content-type: application/json" in result.stdout


def test_show_finds_an_exchange_by_the_fingerprint_a_replay_miss_names(
    journal: Invoke, store: Path
) -> None:
    (row,) = [r for r in ls(journal, store) if r["id"] == ids_by_question(journal, store)["Ping?"]]

    shown = journal("show", row["fingerprint"][:12], "--store", str(store), "--json")

    assert json.loads(shown.stdout)["id"] == row["id"]


def test_show_unknown_id_fails_with_one_line(journal: Invoke, store: Path) -> None:
    result = journal("show", "ffffffffffffffff0000", "--store", str(store))

    assert result.exit_code == 1
    assert result.stderr.startswith("error: no exchange has an id or a fingerprint starting with")
    assert result.stderr.count("\n") == 1
    assert "Traceback" not in result.output


def test_show_ambiguous_prefix_lists_the_candidates(
    journal: Invoke, store: Path, tmp_path: Path
) -> None:
    # Give two exchanges ids that share a prefix, by way of an edited export.
    lines = export(journal, store, "chat").splitlines()
    edited = []
    for n, line in enumerate(lines):
        data = json.loads(line)
        data["record"]["id"] = f"abcdef{n:026d}"
        edited.append(json.dumps(data))
    (tmp_path / "edited.jsonl").write_text("\n".join(edited) + "\n")
    target = tmp_path / "ambiguous"
    assert journal("import", str(tmp_path / "edited.jsonl"), "--store", str(target)).exit_code == 0

    result = journal("show", "abcdef", "--store", str(target))

    assert result.exit_code == 1
    assert "matches 4 exchanges" in result.stderr
    for n in range(4):
        assert f"abcdef{n:026d}" in result.stderr
    assert journal("show", f"abcdef{1:026d}", "--store", str(target)).exit_code == 0


# -- diff ----------------------------------------------------------------------------------------


def test_diff_names_the_changed_request_field(journal: Invoke, store: Path) -> None:
    ids = ids_by_question(journal, store)

    result = journal("diff", ids["Ping?"], ids["Pong?"], "--store", str(store))

    assert result.exit_code == 0, result.output
    assert 'messages[0].content changed ("Ping?" -> "Pong?")' in result.stdout
    assert 'model changed ("gpt-x" -> "gpt-y")' in result.stdout  # not compared, still shown
    assert "reply bodies differ" in result.stdout


def test_diff_json_reports_fields_and_reply_equality(journal: Invoke, store: Path) -> None:
    ids = ids_by_question(journal, store)

    different = json.loads(
        journal("diff", ids["Ping?"], ids["Tell a story"], "--json", "--store", str(store)).stdout
    )
    same = json.loads(
        journal("diff", ids["Ping?"], ids["Ping?"], "--json", "--store", str(store)).stdout
    )

    assert any(line.startswith("messages[0].content changed") for line in different["compared"])
    assert any(line.startswith("stream changed") for line in different["compared"])
    assert different["reply_bodies_equal"] is False
    assert different["same_fingerprint"] is False
    assert same["compared"] == [] and same["meta"] == []
    assert same["reply_bodies_equal"] is True and same["same_fingerprint"] is True


# -- export / import -----------------------------------------------------------------------------


def test_export_import_export_is_byte_identical_and_replays_offline(
    journal: Invoke, store: Path, tmp_path: Path
) -> None:
    first = export(journal, store)
    (tmp_path / "all.jsonl").write_text(first)
    target = tmp_path / "imported"

    imported = journal("import", str(tmp_path / "all.jsonl"), "--store", str(target), "--json")
    second = export(journal, target)

    assert imported.exit_code == 0, imported.output
    assert json.loads(imported.stdout)["imported"] == 4
    assert len(first.splitlines()) == 4
    assert second == first
    # The long stream spilled into frame pages; they came across too.
    pages = [json.loads(line)["record"]["pages"] for line in second.splitlines()]
    assert max(pages) > 1

    offline = Provider()
    client = make_client(offline)
    with pyrula.cassette("chat", mode="none", store=target):
        assert ask(client, "Ping?") == "Answer to Ping?"
        assert ask(client, "Pong?", model="gpt-y") == "Answer to Pong?"
    with pyrula.cassette("chat-stream", mode="none", store=target):
        assert ask_streamed(client, "Tell a story") == STORY
        assert ask_streamed(client, "long").startswith("word0000 ")
    assert offline.calls == []


def test_import_reads_stdin_and_replaces_existing_keys(
    journal: Invoke, store: Path, tmp_path: Path
) -> None:
    text = export(journal, store, "chat-stream")
    target = tmp_path / "twice"

    once = journal("import", "-", "--store", str(target), "--json", input=text)
    again = journal("import", "-", "--store", str(target), "--json", input=text)

    assert json.loads(once.stdout) | {"store": ""} == {"imported": 2, "replaced": 0, "store": ""}
    assert json.loads(again.stdout)["replaced"] == 2
    assert export(journal, target) == text
    stats = json.loads(journal("stats", "--store", str(target), "--json").stdout)
    assert stats["exchanges"] == 2
    # The re-import rewrote the long stream's pages instead of leaving orphans beside them.
    assert (
        stats["frame_pages"]
        == max(json.loads(line)["record"]["pages"] for line in text.splitlines()) - 1
    )


def test_import_refuses_an_edited_request_and_writes_nothing(
    journal: Invoke, store: Path, tmp_path: Path
) -> None:
    lines = export(journal, store, "chat").splitlines()
    data = json.loads(lines[1])
    data["request"]["compared"]["messages"][0]["content"] = "Tampered?"
    (tmp_path / "bad.jsonl").write_text(lines[0] + "\n" + json.dumps(data) + "\n")
    target = tmp_path / "refused"

    result = journal("import", str(tmp_path / "bad.jsonl"), "--store", str(target))

    assert result.exit_code == 1
    assert "line 2" in result.stderr and "does not match" in result.stderr
    assert ls(journal, target) == []  # all or nothing: line 1 was not kept either


def test_import_refuses_a_file_that_is_not_an_export(journal: Invoke, tmp_path: Path) -> None:
    (tmp_path / "notes.jsonl").write_text('{"hello": "world"}\n')

    result = journal("import", str(tmp_path / "notes.jsonl"), "--store", str(tmp_path / "t"))

    assert result.exit_code == 1
    assert result.stderr.startswith("error: line 1 ")


def test_import_refuses_a_record_id_already_used_under_another_key(
    journal: Invoke, store: Path, tmp_path: Path
) -> None:
    line = json.loads(export(journal, store, "chat").splitlines()[0])
    line["key"] = line["key"][:-8] + "00000007"  # same request, a later occurrence
    (tmp_path / "moved.jsonl").write_text(json.dumps(line) + "\n")
    before = export(journal, store)

    result = journal("import", str(tmp_path / "moved.jsonl"), "--store", str(store))

    assert result.exit_code == 1
    assert "already belongs to another exchange" in result.stderr
    assert export(journal, store) == before


def test_export_to_an_unwritable_place_is_one_line(
    journal: Invoke, store: Path, tmp_path: Path
) -> None:
    result = journal(
        "export", "-o", str(tmp_path / "no" / "such" / "dir.jsonl"), "--store", str(store)
    )

    assert result.exit_code == 1
    assert result.stderr.startswith("error: cannot use ")
    assert "No such file or directory" in result.stderr


def test_har_export_is_a_valid_har_1_2_archive(
    journal: Invoke, store: Path, tmp_path: Path
) -> None:
    out = tmp_path / "calls.har"

    result = journal("export", "--format", "har", "-o", str(out), "--store", str(store))

    assert result.exit_code == 0, result.output
    har = json.loads(out.read_text())
    log = har["log"]
    assert log["version"] == "1.2"
    assert log["creator"]["name"] == "pyrula"
    assert len(log["entries"]) == 4
    for entry in log["entries"]:
        assert set(entry) >= {"startedDateTime", "time", "request", "response", "cache", "timings"}
        datetime.fromisoformat(entry["startedDateTime"])
        assert entry["time"] == sum(v for v in entry["timings"].values() if v >= 0)
        request, response = entry["request"], entry["response"]
        for field in ("method", "url", "httpVersion", "cookies", "headers", "queryString"):
            assert field in request
        assert request["headersSize"] == -1 and isinstance(request["bodySize"], int)
        assert json.loads(request["postData"]["text"])["surface"] == "openai.chat"
        for field in ("status", "statusText", "httpVersion", "cookies", "headers", "redirectURL"):
            assert field in response
        content = response["content"]
        assert content["size"] == len(content["text"].encode())
        assert content["mimeType"] in ("application/json", "text/event-stream")
    streamed = [e for e in log["entries"] if e["_pyrula"]["streamed"]]
    assert any(STORY.split(" ")[0] in e["response"]["content"]["text"] for e in streamed)


def test_a_secret_used_while_recording_is_in_no_export(
    journal: Invoke, store: Path, provider: Provider
) -> None:
    assert all(SECRET in key for key in provider.keys_seen)  # it was sent, and echoed back

    jsonl = export(journal, store)
    har = export(journal, store, "--format", "har")
    shown = [
        journal("show", r["id"], "--raw", "--store", str(store)).stdout for r in ls(journal, store)
    ]

    for text in (jsonl, har, *shown):
        assert SECRET not in text
        assert SECRET[3:] not in text
    assert "[scrubbed]" in jsonl  # the echo was masked, not dropped


# -- prune ---------------------------------------------------------------------------------------


def test_prune_deletes_matching_exchanges_and_keeps_the_rest(journal: Invoke, store: Path) -> None:
    blobs_before = json.loads(journal("stats", "--store", str(store), "--json").stdout)["blobs"]

    result = journal("prune", "chat-", "--yes", "--store", str(store))

    assert result.exit_code == 0, result.output
    assert "Deleted 2 exchanges" in result.stdout
    assert {r["namespace"] for r in ls(journal, store)} == {"chat"}
    stats = json.loads(journal("stats", "--store", str(store), "--json").stdout)
    assert 0 < stats["blobs"] < blobs_before
    assert stats["frame_pages"] == 0  # the long stream's pages went with it
    # What is left still replays, its request blobs intact.
    with pyrula.cassette("chat", mode="none", store=store):
        assert ask(make_client(Provider()), "Ping?") == "Answer to Ping?"


def test_prune_dry_run_and_a_declined_prompt_delete_nothing(journal: Invoke, store: Path) -> None:
    dry = journal("prune", "--dry-run", "--store", str(store), "--json")
    declined = journal("prune", "--store", str(store), input="n\n")

    assert json.loads(dry.stdout)["matched"] == 4 and json.loads(dry.stdout)["deleted"] == 0
    unanswered = journal("prune", "--store", str(store))  # stdin closed: no answer

    assert declined.exit_code == 0 and "Nothing deleted" in declined.stdout
    assert unanswered.exit_code == 1 and "pass --yes" in unanswered.stderr
    assert len(ls(journal, store)) == 4


def test_prune_asks_and_deletes_on_yes(journal: Invoke, store: Path) -> None:
    result = journal("prune", "--surface", "openai.chat", "--store", str(store), input="y\n")

    assert result.exit_code == 0, result.output
    assert "Delete these 4 exchanges from 2 cassettes?" in result.stdout
    assert ls(journal, store) == []


def test_prune_without_a_filter_or_a_question_needs_all(journal: Invoke, store: Path) -> None:
    refused_json = journal("prune", "--json", "--store", str(store))
    refused_yes = journal("prune", "--yes", "--store", str(store))

    assert refused_json.exit_code == 1 and "--all" in json.loads(refused_json.stderr)["message"]
    assert refused_yes.exit_code == 1 and "pass --all" in refused_yes.stderr
    assert len(ls(journal, store)) == 4

    emptied = journal("prune", "--json", "--all", "--store", str(store))
    assert json.loads(emptied.stdout)["deleted"] == 4
    assert ls(journal, store) == []


def test_prune_older_than_spares_fresh_recordings(journal: Invoke, store: Path) -> None:
    result = journal("prune", "--older-than", "1", "--json", "--store", str(store))

    assert json.loads(result.stdout)["deleted"] == 0
    assert len(ls(journal, store)) == 4


# -- stats ---------------------------------------------------------------------------------------


def test_stats_counts_per_cassette_and_surface(journal: Invoke, store: Path) -> None:
    stats = json.loads(journal("stats", "--store", str(store), "--json").stdout)

    assert stats["exchanges"] == 4 and stats["streamed"] == 2
    assert {name: c["exchanges"] for name, c in stats["namespaces"].items()} == {
        "chat": 2,
        "chat-stream": 2,
    }
    assert stats["surfaces"]["openai.chat"]["exchanges"] == 4
    assert stats["frames"] > 4  # the long stream arrived event by event
    assert stats["bytes"] == sum(r["size"] for r in ls(journal, store))
    assert stats["file_bytes"] == (store / "data.mdb").stat().st_size
    assert stats["blobs"] > 0
    text = journal("stats", "--store", str(store))
    assert text.exit_code == 0 and "chat-stream" in text.stdout


# -- errors --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "command",
    [
        ["ls"],
        ["show", "abc"],
        ["diff", "abc", "def"],
        ["export"],
        ["prune", "--yes", "--all"],
        ["stats"],
    ],
)
def test_a_missing_store_is_one_clear_line_and_exit_1(
    journal: Invoke, tmp_path: Path, command: list[str]
) -> None:
    missing = tmp_path / "nowhere"

    result = journal(*command, "--store", str(missing))

    assert result.exit_code == 1
    assert result.stderr.startswith(f"error: no Pyrula store at {missing}; check the path")
    assert result.stderr.count("\n") == 1
    assert not missing.exists()  # looking did not create it


def test_errors_are_json_with_json(journal: Invoke, tmp_path: Path) -> None:
    result = journal("ls", "--json", "--store", str(tmp_path / "nowhere"))

    assert result.exit_code == 1
    error = json.loads(result.stderr)
    assert error["error"] == "StoreNotFound"
    assert "no Pyrula store at" in error["message"]


def test_a_corrupt_store_is_reported_not_raised(journal: Invoke, tmp_path: Path) -> None:
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "data.mdb").write_bytes(b"this is not an LMDB file" * 100)

    result = journal("stats", "--store", str(broken))

    assert result.exit_code == 1
    assert result.stderr.startswith("error: ")
    assert "Traceback" not in result.output and result.exception is not None
    assert isinstance(result.exception, SystemExit)


def test_a_folder_that_is_not_a_store_is_refused(journal: Invoke, tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("hello")

    result = journal("ls", "--store", str(tmp_path))

    assert result.exit_code == 1
    assert "without a Pyrula store" in result.stderr


def test_ls_fits_each_row_to_the_terminal_keeping_the_end_of_long_names(
    journal: Invoke, store: Path
) -> None:
    from typer.testing import CliRunner

    from pyrula.cli.app import app

    long_name = "tests/integration/test_a_rather_long_module_name.py::test_the_distinctive_end"
    with pyrula.cassette(long_name, store=store):
        ask(make_client(Provider()), "Ping?")

    result = CliRunner().invoke(
        app, ["journal", "ls", "--store", str(store)], env={"COLUMNS": "80"}
    )

    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert len(lines) == 1 + 5  # a header and one line per exchange, nothing wrapped
    assert all(len(line) <= 80 for line in lines)
    row = next(line for line in lines if "…" in line)
    shown = row.split()[1]  # id, then what is left of the cassette name
    assert len(shown) >= 8 and long_name.endswith(shown[1:])


def test_an_export_moves_between_lmdb_and_postgresql_byte_for_byte(
    journal: Invoke, store: Path, tmp_path: Path
) -> None:
    first = export(journal, store)
    (tmp_path / "all.jsonl").write_text(first)
    url = fresh_url()

    into_pg = journal("import", str(tmp_path / "all.jsonl"), "--store", url, "--json")
    from_pg = journal("export", "--store", url)
    (tmp_path / "pg.jsonl").write_text(from_pg.stdout)
    back = tmp_path / "back"
    into_lmdb = journal("import", str(tmp_path / "pg.jsonl"), "--store", str(back), "--json")

    assert into_pg.exit_code == 0, into_pg.output
    assert json.loads(into_pg.stdout)["imported"] == 4
    assert from_pg.stdout == first
    assert into_lmdb.exit_code == 0, into_lmdb.output
    assert export(journal, back) == first
    offline = Provider()
    client = make_client(offline)
    with pyrula.cassette("chat-stream", mode="none", store=url):
        assert ask_streamed(client, "Tell a story") == STORY
        assert ask_streamed(client, "long").startswith("word0000 ")
    assert offline.calls == []
    stats = json.loads(journal("stats", "--store", url, "--json").stdout)
    assert stats["exchanges"] == 4
