"""``primacy doctor --zookeeper``: the ensemble's servers, its quorum, and the session timeout it
grants against the keepalive, checked on a real three-server ensemble."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest

from primacy.cli.localgroup import free_port, wait_until
from primacy.nfs_profiles import codes
from primacy.nfs_profiles.ensemble import check_access, check_ensemble
from primacy.nfs_profiles.findings import Severity
from primacy.share.records import EpochRecord
from primacy.share.zookeeper import ZooKeeperShare
from tests.harness.cli import primacy
from tests.harness.zookeeper import TICK_MS, Ensemble

pytestmark = pytest.mark.zookeeper
MAX_SESSION_S = 20 * TICK_MS / 1000  # what the ensemble grants at most
# A live server's session (TLS handshake, digest authentication) took over a second under
# three test workers on two cores; a server nobody listens on is refused at once anyway.
CONNECT_TIMEOUT_S = 5


def test_a_healthy_ensemble_is_fine(zookeeper_ensemble: Ensemble) -> None:
    (finding,) = check_ensemble(
        zookeeper_ensemble.hosts,
        MAX_SESSION_S,
        0.25,
        0.1,
        connect_timeout_s=CONNECT_TIMEOUT_S,
        access=zookeeper_ensemble.access,
    )
    assert finding.severity is Severity.OK
    assert "3 of 3 servers serve" in finding.message


def test_a_server_that_grants_no_session_is_named(zookeeper_ensemble: Ensemble) -> None:
    nobody = f"127.0.0.1:{free_port()}"
    findings = check_ensemble(
        f"{zookeeper_ensemble.hosts},{nobody}",
        MAX_SESSION_S,
        0.25,
        0.1,
        connect_timeout_s=CONNECT_TIMEOUT_S,
        access=zookeeper_ensemble.access,
    )
    assert [(f.code, f.subject) for f in findings] == [(codes.ZOOKEEPER_SERVER_UNAVAILABLE, nobody)]


def test_no_majority_is_no_quorum(zookeeper_ensemble: Ensemble) -> None:
    first = zookeeper_ensemble.servers[0].address
    nobody = [f"127.0.0.1:{free_port()}" for _ in range(2)]
    findings = check_ensemble(
        ",".join([first, *nobody]),
        MAX_SESSION_S,
        0.25,
        0.1,
        connect_timeout_s=CONNECT_TIMEOUT_S,
        access=zookeeper_ensemble.access,
    )
    assert findings[-1].code == codes.ZOOKEEPER_NO_QUORUM
    assert findings[-1].severity is Severity.REFUSED


def test_a_clamped_timeout_shorter_than_the_keepalive_is_refused(
    zookeeper_ensemble: Ensemble,
) -> None:
    # Asked for a minute, granted the ensemble's maximum, which a 5 s keepalive outlasts.
    findings = check_ensemble(
        zookeeper_ensemble.hosts,
        60.0,
        5.0,
        0.1,
        connect_timeout_s=CONNECT_TIMEOUT_S,
        access=zookeeper_ensemble.access,
    )
    assert [f.code for f in findings] == [
        codes.ZOOKEEPER_SESSION_TIMEOUT_CLAMPED,
        codes.ZOOKEEPER_SESSION_SHORTER_THAN_KEEPALIVE,
    ]
    assert f"granted {MAX_SESSION_S:g} s" in findings[0].message


def test_primacy_doctor_checks_the_ensemble_beside_the_share(
    zookeeper_ensemble: Ensemble, share: Path
) -> None:
    ensemble = zookeeper_ensemble.hosts
    # The config's default session, 10 s: this ensemble grants 4 s at most, and says so.
    access = (
        "--zookeeper-credentials-file",
        str(zookeeper_ensemble.credentials_file),
        *zookeeper_ensemble.tls_args(),
    )
    done = primacy(
        "doctor", str(share), "--no-round-trips", "--json", "--zookeeper", ensemble, *access
    )
    (finding,) = [f for f in json.loads(done.stdout)["findings"] if f["subject"] == ensemble]
    assert finding["code"] == codes.ZOOKEEPER_SESSION_TIMEOUT_CLAMPED
    assert finding["message"] == f"asked for a 10 s session, granted {MAX_SESSION_S:g} s"
    # Asked for a minute, granted this ensemble's maximum, shorter than a 5 s keepalive.
    refused = primacy(
        "doctor",
        str(share),
        "--no-round-trips",
        "--json",
        "--zookeeper",
        ensemble,
        "--zookeeper-session-timeout-ms",
        "60000",
        "--lock-keep-alive-period-ms",
        "5000",
        *access,
    )
    codes_seen = [f["code"] for f in json.loads(refused.stdout)["findings"]]
    assert codes.ZOOKEEPER_SESSION_SHORTER_THAN_KEEPALIVE in codes_seen
    assert refused.returncode == 2


def test_the_doctor_reports_open_acls_a_loose_credentials_file_and_plaintext(
    zookeeper_ensemble: Ensemble, tmp_path: Path
) -> None:
    # A group made by a node without credentials: every znode open to anyone.
    path = f"/doctor-{uuid.uuid4().hex[:12]}"
    anonymous = ZooKeeperShare(zookeeper_ensemble.plain_hosts, path, session_timeout_s=4.0)
    try:
        wait_until(lambda: anonymous.session_state == "connected", 30, "a session")
        anonymous.claim_epoch(EpochRecord.claim("old", None, 250, False))
    finally:
        anonymous.close()
    ca, cert, key = zookeeper_ensemble.tls_files
    credentials = zookeeper_ensemble.credentials_file
    findings, access = check_access(zookeeper_ensemble.hosts, path, credentials, (ca, cert, key))
    assert access is not None
    (finding,) = findings
    assert (finding.code, finding.severity) == (codes.ZOOKEEPER_OPEN_ACL, Severity.REFUSED)
    assert f"{path}/epoch" in finding.message

    # A node with the group's credentials closes them; the doctor finds nothing more.
    node = ZooKeeperShare(
        zookeeper_ensemble.hosts, path, session_timeout_s=4.0, access=zookeeper_ensemble.access
    )
    try:
        wait_until(lambda: node.session_state == "connected", 30, "a session")
        assert f"{path}/epochs/1" in node.secure_group()
    finally:
        node.close()
    findings, _ = check_access(zookeeper_ensemble.hosts, path, credentials, (ca, cert, key))
    assert findings == ()

    # Without credentials or TLS: two warnings; a credentials file others can read: refused.
    findings, _ = check_access(zookeeper_ensemble.plain_hosts, path, None)
    assert [f.code for f in findings] == [codes.ZOOKEEPER_NO_CREDENTIALS, codes.ZOOKEEPER_PLAINTEXT]
    loose = tmp_path / "credentials"
    loose.write_text("primacy:secret\n")
    loose.chmod(0o644)
    (finding,), access = check_access(zookeeper_ensemble.hosts, path, loose)
    assert (finding.code, access) == (codes.ZOOKEEPER_CREDENTIALS_UNUSABLE, None)
    assert "chmod 600" in finding.message
