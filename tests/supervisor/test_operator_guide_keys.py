"""The operator guide's key tables agree with the declarations: every key in one row, with its
flag and its real default, so a default changed in code fails here until the guide follows."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from primacy.store.config import MIB, NO_LIMIT_KEYS
from primacy.supervisor.config import CONFIG_KEYS, NodeConfig

GUIDE = Path(__file__).resolve().parents[2] / "docs" / "operator-guide.md"
DAY_S = 86_400
# The first column of a key table: `name`, and its flag in parentheses where the table has them.
KEY_CELL = re.compile(r"`(\w+)`(?: \(`(--[\w-]+)`\))?")


def _tables(header: str) -> list[list[list[str]]]:
    """The rows (as cells) of every table in the guide whose header line starts with ``header``."""
    tables: list[list[list[str]]] = []
    lines = GUIDE.read_text().splitlines()
    for at, line in enumerate(lines):
        if line.startswith(header):
            rows = []
            for row in lines[at + 2 :]:
                if not row.startswith("|"):
                    break
                rows.append([cell.strip() for cell in row.strip("|").split(" | ")])
            tables.append(rows)
    return tables


def _key_rows() -> list[list[str]]:
    return [
        row
        for header in ("| key (flag) | default |", "| setting | default |")
        for table in _tables(header)
        for row in table
    ]


def _number(value: float) -> str:
    return str(int(value)) if value == int(value) else str(value)


def documented_default(name: str) -> str:
    """A key's default as the guide writes it, from its declaration."""
    field = NodeConfig.model_fields[name]
    extra = field.json_schema_extra if isinstance(field.json_schema_extra, dict) else {}
    value = field.default
    if field.is_required():
        return "required"
    if extra.get("default_text"):
        return str(extra["default_text"])
    if value is None:
        return '`"none"`' if name in NO_LIMIT_KEYS else "none"
    if value == ():
        return "none"
    if isinstance(value, bool):
        return f"`{str(value).lower()}`"
    if isinstance(value, str):  # literals and string enums
        return f"`{value}`"
    text = _number(value)
    if extra.get("metavar") == "BYTES" and value >= MIB and value % MIB == 0:
        text += f" ({value // MIB} MiB)"
    if name.endswith("_s") and value >= DAY_S and value % DAY_S == 0:
        text += f" ({int(value // DAY_S)} days)"
    return text


def _disagreements() -> list[str]:
    """Where the key tables and the declarations differ, one line each."""
    problems, named = [], []
    for row in _key_rows():
        match = KEY_CELL.fullmatch(row[0])
        if match is None:
            problems.append(f"not a key cell: {row[0]}")
            continue
        name, flag = match.groups()
        if name not in CONFIG_KEYS:
            problems.append(f"the guide documents {name}, which is no key")
            continue
        if flag not in (None, "--" + name.replace("_", "-")):
            problems.append(f"{name}: the guide gives the flag {flag}")
        if row[1] != documented_default(name):
            problems.append(f"{name}: the guide says {row[1]}, the code {documented_default(name)}")
        named.append(name)
    problems += [f"{name} is in no table" for name in CONFIG_KEYS if name not in named]
    problems += [f"{name} is in more than one row" for name in set(named) if named.count(name) > 1]
    return problems


def test_every_key_has_one_row_with_its_flag_and_real_default() -> None:
    assert _disagreements() == []


def test_a_default_changed_in_code_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(NodeConfig.model_fields["max_connections"], "default", 2000)
    assert _disagreements() == ["max_connections: the guide says 1000, the code 2000"]


def test_the_profile_tables_local_column_shows_the_effective_defaults() -> None:
    """The nfs4 walk-through compares its values with the defaults of a local share."""
    (table,) = _tables("| key | nfs4 | local (defaults) |")
    defaults = NodeConfig(node_id="a", share=Path("."))
    derived = {"watchdog_s": defaults.watchdog_timeout_s}
    for row in table:
        name = row[0].strip("`")
        value = derived.get(name, getattr(defaults, name))
        shown = _number(value) if isinstance(value, int | float) else f"`{value}`"
        assert row[2] == shown, f"{name}: the guide says {row[2]}"
