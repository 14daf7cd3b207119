"""Every "not yet" / "not built" item in docs/ is accounted for in docs/limitations.md (issue 40).

An item is a bullet under a heading that says "not yet", "not built" or "not done yet" (or the
section's text, when it has no bullets), and any other line of a page that says, unquoted, "not
yet", "not built", "not supported yet" or "not done yet". docs/limitations.md has one table row
per item: the page, a phrase of the item (its text, whitespace aside, contains the phrase), and
what pins it: the test ids (`tests/path.py::test_name`) that show it as the docs say, or `open:`
and why the limitation still holds. A row whose item left its page fails too, so the table
stays true.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from tests.support import ROOT, known_test, pages

REGISTRY = ROOT / "docs" / "limitations.md"
# Not when quoted (`"not yet"`): a page naming the phrase or a section says nothing is missing.
PHRASE = re.compile(r"(?<![\"'`])not (?:yet|built|supported yet|done yet)\b", re.I)
HEADING = re.compile(r"^#+\s")
_TEST_ID = re.compile(r"tests/[\w/]+\.py::[\w:\[\]-]+")


@dataclass(frozen=True)
class Item:
    page: str
    line: int
    text: str


def _flat(text: str) -> str:
    return " ".join(text.replace("`", "").split()).lower()


def _page_items(page: str, lines: list[str]) -> list[Item]:
    found: list[Item] = []
    section = False  # inside a "Not yet" section
    fenced = False
    current: list[tuple[int, str]] = []  # the open item's lines (number, text)

    def close() -> None:
        if current:
            found.append(Item(page, current[0][0], " ".join(t for _, t in current)))
            current.clear()

    for number, line in enumerate(lines, 1):
        if line.startswith("```"):
            fenced = not fenced
            close()
            continue
        if fenced:
            continue
        if HEADING.match(line):
            close()
            section = bool(PHRASE.search(line))
            continue
        if section:
            if line.startswith("- ") or not line.strip():
                close()
            if line.strip():
                current.append((number, line.strip()))
        elif PHRASE.search(line):
            found.append(Item(page, number, line.strip()))
    close()
    return found


def items() -> list[Item]:
    return [
        item
        for path in pages()
        if path != REGISTRY and path.name != "README.md"
        for item in _page_items(str(path.relative_to(ROOT)), path.read_text().splitlines())
    ]


@dataclass(frozen=True)
class Row:
    line: int
    page: str
    phrase: str
    pinned: str


def rows() -> list[Row]:
    found: list[Row] = []
    for number, line in enumerate(REGISTRY.read_text().splitlines(), 1):
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if not line.startswith("|") or len(cells) != 3 or not cells[0].startswith("docs/"):
            continue
        found.append(Row(number, cells[0].strip("`"), cells[1].strip("`").strip('"'), cells[2]))
    return found


def test_every_not_yet_item_in_the_docs_is_listed_with_what_pins_it() -> None:
    listed = rows()
    missing = [
        f"{item.page}:{item.line}: {item.text[:100]!r}"
        for item in items()
        if not any(r.page == item.page and _flat(r.phrase) in _flat(item.text) for r in listed)
    ]
    assert missing == [], (
        "add a row to docs/limitations.md for each (| page | a phrase of the item | the test "
        "ids that pin it, or open: why it still holds |):\n" + "\n".join(missing)
    )


def test_every_row_names_tests_that_exist_or_says_why_it_is_open() -> None:
    wrong = []
    for row in rows():
        ids = _TEST_ID.findall(row.pinned)
        if row.pinned.startswith("open:") and len(row.pinned) > len("open: ") + 10:
            continue
        if not ids or not all(known_test(i) for i in ids):
            wrong.append(f"docs/limitations.md:{row.line}: {row.pinned!r}")
    assert wrong == [], (
        "each row names existing tests (tests/path.py::test_name) or starts `open:` with the "
        "reason: " + "; ".join(wrong)
    )


def test_every_row_still_matches_an_item_of_its_page() -> None:
    found = items()
    stale = [
        f"docs/limitations.md:{row.line}: {row.page} {row.phrase!r}"
        for row in rows()
        if not any(i.page == row.page and _flat(row.phrase) in _flat(i.text) for i in found)
    ]
    assert rows() and stale == [], (
        "these rows match no 'not yet' item any more (lifted, or reworded): remove or update "
        "them: " + "; ".join(stale)
    )
