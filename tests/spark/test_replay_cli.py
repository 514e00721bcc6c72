"""``primacy replay`` glue: registers, checks arguments before Spark, explains what is missing."""

from __future__ import annotations

import argparse
import importlib.util
from pathlib import Path

import pytest

from supervisor import replay_cli


def parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="primacy")
    replay_cli.register(parser.add_subparsers(dest="command", required=True))
    return parser.parse_args(["replay", *argv])


def test_replay_registers_with_its_options() -> None:
    args = parse("/srv/share", "--out", "/tmp/o", "--since", "2026-01-01T00:00:00Z")
    assert (args.share, args.out, args.since, args.master) == (
        "/srv/share",
        "/tmp/o",
        "2026-01-01T00:00:00Z",
        None,
    )
    assert args.func is replay_cli.cmd_replay


def test_without_pyspark_it_says_how_to_install_the_extra(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "pyspark" else real(name, *a)
    )
    assert replay_cli.cmd_replay(parse(str(tmp_path), "--out", str(tmp_path / "o"))) == 1
    assert "pip install 'primacy[spark]'" in capsys.readouterr().err


def test_without_java_it_says_so(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    monkeypatch.delenv("JAVA_HOME", raising=False)
    monkeypatch.setattr(replay_cli.shutil, "which", lambda name: None)
    assert replay_cli.cmd_replay(parse(str(tmp_path), "--out", str(tmp_path / "o"))) == 1
    assert "Java 17" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("extra", "message"),
    [(["--since", "last tuesday"], "ISO 8601"), ([], "no journal/ directory")],
)
def test_bad_arguments_are_refused_before_spark_starts(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    extra: list[str],
    message: str,
) -> None:
    monkeypatch.setattr(replay_cli, "missing_requirement", lambda: None)
    if extra:
        (tmp_path / "journal").mkdir()
    assert replay_cli.cmd_replay(parse(str(tmp_path), "--out", str(tmp_path / "o"), *extra)) == 2
    assert message in capsys.readouterr().err
