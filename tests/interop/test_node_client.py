"""Interop with a STOMP client that is not Python and not ours: stompit, for Node.js (what
an application team on Node writes), plain and over TLS, with a login; installed by the
test set-up (``.ci/setup dev`` runs ``npm install`` here)."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from primacy.broker.config import BrokerConfig
from primacy.broker.users import User, hash_password, save_users
from tests.broker.nodes import Masters, eventually, stored_send_ids
from tests.harness.tls_certs import make_pki

HERE = Path(__file__).parent
SCRIPT = HERE / "stompit_roundtrip.js"
DURABLE_SCRIPT = HERE / "stompit_durable.js"
NODE = shutil.which("node")
MISSING = (
    "node is not installed (run .ci/setup dev as root)"
    if NODE is None
    else "stompit is not installed (cd tests/interop && npm install)"
    if not (HERE / "node_modules" / "stompit").is_dir()
    else None
)


def _round_trip(settings: dict[str, object], script: Path = SCRIPT) -> dict[str, object]:
    if MISSING is not None:
        pytest.skip(MISSING)
    assert NODE is not None
    result = subprocess.run(
        [NODE, str(script), json.dumps(settings)],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=HERE,
    )
    outcome: dict[str, object] = json.loads(result.stdout.strip().splitlines()[-1])
    assert result.returncode == 0, (outcome, result.stderr)
    return outcome


@pytest.mark.parametrize("ack", ["auto", "client", "client-individual"])
@pytest.mark.parametrize("tls", [False, True], ids=["plain", "tls"])
def test_stompit_sends_receives_acks_and_nacks(
    masters: Masters, tmp_path: Path, tls: bool, ack: str
) -> None:
    pki = make_pki(tmp_path / "pki")
    users = tmp_path / "users.json"
    save_users(users, {"node": User("node", hash_password("node password"))})
    config = BrokerConfig(
        stomp_users=users,
        stomp_tls_cert=pki.cert if tls else None,
        stomp_tls_key=pki.key if tls else None,
    )
    master = masters.start(config)
    outcome = _round_trip(
        {
            "host": "127.0.0.1",
            "port": master.address[1],
            "ca": str(pki.ca) if tls else None,
            "login": "node",
            "passcode": "node password",
            "destination": "/queue/interop",
            "ack": ack,
        }
    )
    assert outcome["receipts"] == 3
    assert outcome["nacked"] == ([] if ack == "auto" else ["m1"])
    assert sorted(outcome["received"]) == ["m1", "m2", "m3"]  # type: ignore[arg-type]
    # The journal keeps ids scoped by login (docs/journal-format.md); consumers see their own.
    assert sorted(stored_send_ids(masters.share)) == ["node/m1", "node/m2", "node/m3"]
    stats = master.service.stats()
    assert stats["logins_ok"] == 1
    assert stats["redeliveries"] == (0 if ack == "auto" else 1)
    eventually(
        lambda: master.service.stats()["messages_acked"] == 3,
        f"every message acked: {outcome}, {master.service.stats()}",
    )


def test_stompit_keeps_a_durable_topic_subscription_while_away(masters: Masters) -> None:
    master = masters.start()
    outcome = _round_trip(
        {"host": "127.0.0.1", "port": master.address[1], "topic": "/topic/interop"},
        DURABLE_SCRIPT,
    )
    assert outcome["sent"] == 3
    assert outcome["received"] == ["t1", "t2", "t3"]
    assert outcome["destinations"] == ["/topic/interop"] * 3
