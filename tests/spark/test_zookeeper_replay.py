"""The replay of a group that coordinates on ZooKeeper: its tenures come from the ensemble.

Such a group keeps its journal on the share but its epoch claims in znodes, so the share has
no ``epochs/``. Three masters in turn, each with a real ``Lease`` on a real ensemble (TLS and
the group's digest identity, as the nodes run): node-a stops gracefully, node-b crashes (its
session ends without a release), node-c serves on. ``primacy replay`` is given the ensemble
the way ``primacy status --zookeeper`` is, and runs on the tests' local Spark session.
"""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest

from primacy.cli.main import build_parser
from primacy.cli.replay import epoch_claims_of
from primacy.locker.lease import Lease
from primacy.share.zookeeper import ZooKeeperShare
from primacy.spark.replay import options_from_args, run
from primacy.spark.tenure import CRASHED, GRACEFUL, SERVING
from tests.harness.zookeeper import Ensemble
from tests.share.ports import zookeeper_handles
from tests.spark.journal_scenario import WrittenJournal, master, role_event, send

pytestmark = [pytest.mark.spark, pytest.mark.zookeeper, pytest.mark.slow]


def write_zookeeper_group_journal(share: Path, ensemble: Ensemble, path: str) -> WrittenJournal:
    written = WrittenJournal(share)
    opened: list[ZooKeeperShare] = []
    handle = zookeeper_handles(ensemble.hosts, path, opened, ensemble.access)
    try:
        with master(written, "node-a", Lease(handle(), "node-a")) as (lease, store):
            send(written, store, "/queue/a", ["a-1", "a-2"])
            stop = role_event("node-a", "master", "stopping", store.epoch, "shutdown")
            store.append_control(stop).result(5)
        lease.release()
        crashed = handle()
        with master(written, "node-b", Lease(crashed, "node-b")) as (_, store):
            send(written, store, "/queue/a", ["b-1"])
        crashed.close()  # a crash: the session ends, the ephemeral lock goes, no release
        with master(written, "node-c", Lease(handle(), "node-c")) as (_, store):
            send(written, store, "/queue/a", ["c-1"])
    finally:
        for port in opened:
            port.close()
    return written


def test_a_replay_of_a_zookeeper_group_shows_its_tenures(
    tmp_path: Path, zookeeper_ensemble: Ensemble, spark_session: Any
) -> None:
    share, out = tmp_path / "share", tmp_path / "out"
    share.mkdir()
    path = f"/replay-{uuid.uuid4().hex}"
    written = write_zookeeper_group_journal(share, zookeeper_ensemble, path)
    assert written.nodes_by_epoch == {1: "node-a", 2: "node-b", 3: "node-c"}
    assert not (share / "epochs").exists() or not any((share / "epochs").iterdir())

    args = build_parser().parse_args(
        [
            "replay",
            str(share),
            "--out",
            str(out),
            "--quiet",
            "--zookeeper",
            zookeeper_ensemble.hosts,
            "--zookeeper-path",
            path,
            *zookeeper_ensemble.tls_args(),
        ]
    )
    with epoch_claims_of(args):
        run(options_from_args(args), spark_session)

    tenure = sorted(
        spark_session.read.parquet(str(out / "tenure")).collect(), key=lambda row: row["epoch"]
    )
    assert [(row["epoch"], row["node"]) for row in tenure] == [
        (1, "node-a"),
        (2, "node-b"),
        (3, "node-c"),
    ]
    # Every claim read from the ensemble: when each was claimed, and a crash ends at the
    # next claim (without the claims it would end nowhere: no stop record, no claim time).
    assert all(row["claimed_at"] is not None for row in tenure)
    assert [row["how_ended"] for row in tenure] == [GRACEFUL, CRASHED, SERVING]
    assert tenure[1]["to_time"] == tenure[2]["claimed_at"]


def test_a_replay_given_a_path_no_group_used_says_so_before_spark_starts(
    tmp_path: Path, zookeeper_ensemble: Ensemble
) -> None:
    from primacy.cli.group_records import RecordsUnreadable

    (tmp_path / "journal").mkdir()
    args = build_parser().parse_args(
        [
            "replay",
            str(tmp_path),
            "--out",
            str(tmp_path / "out"),
            "--zookeeper",
            zookeeper_ensemble.hosts,
            "--zookeeper-path",
            f"/never-{uuid.uuid4().hex}",
            *zookeeper_ensemble.tls_args(),
        ]
    )
    with pytest.raises(RecordsUnreadable, match="no primacy group has used"):
        epoch_claims_of(args).__enter__()
