"""``primacy users`` and ``primacy run --stomp-users`` as an operator runs them."""

from __future__ import annotations

import json
import stat
from pathlib import Path

from primacy.broker.users import load_users, password_matches
from tests.harness.cli import primacy


def test_users_add_list_remove(tmp_path: Path) -> None:
    users = tmp_path / "users.json"
    added = primacy(
        "users", "add", str(users), "orders", "--send", "/queue/orders.>", stdin="s3cret pass\n"
    )
    assert added.returncode == 0, added.stderr
    assert "may send to /queue/orders.>; may receive from >" in added.stdout
    assert stat.S_IMODE(users.stat().st_mode) == 0o600
    (user,) = load_users(users).values()
    assert password_matches(user.password_hash, "s3cret pass")
    assert "s3cret" not in users.read_text()  # a hash, never the password
    assert json.loads(users.read_text())["users"]["orders"]["password"].startswith("$argon2id$")

    assert primacy("users", "add", str(users), "ops", stdin="another pass\n").returncode == 0
    listed = primacy("users", "list", str(users))
    assert listed.returncode == 0
    assert listed.stdout.splitlines() == [
        "ops\tsend: >\treceive: >",
        "orders\tsend: /queue/orders.>\treceive: >",
    ]
    assert primacy("users", "remove", str(users), "ops").returncode == 0
    assert list(load_users(users)) == ["orders"]
    missing = primacy("users", "remove", str(users), "ops")
    assert missing.returncode == 1 and "no user 'ops'" in missing.stderr


def test_users_add_refuses_a_short_password_a_bad_name_and_a_bad_pattern(tmp_path: Path) -> None:
    users = tmp_path / "users.json"
    short = primacy("users", "add", str(users), "a", stdin="short\n")
    assert short.returncode == 2 and "8 characters or more" in short.stderr
    name = primacy("users", "add", str(users), "bad name", stdin="long enough\n")
    assert name.returncode == 2 and "is not a user name" in name.stderr
    pattern = primacy("users", "add", str(users), "a", "--send", "a.>.b", stdin="long enough\n")
    assert pattern.returncode == 2 and "not a destination pattern" in pattern.stderr
    assert not users.exists()


def test_run_refuses_a_users_file_others_can_write(tmp_path: Path) -> None:
    users = tmp_path / "users.json"
    assert primacy("users", "add", str(users), "a", stdin="long enough\n").returncode == 0
    users.chmod(0o664)
    share = tmp_path / "share"
    share.mkdir()
    base = ["run", "--node-id", "a", "--share", str(share), "--stomp", "127.0.0.1:1"]
    refused = primacy(*base, "--stomp-users", str(users))
    assert refused.returncode == 2
    assert "PRIMACY-2010" in refused.stderr and "writable by others (mode 0664)" in refused.stderr
