"""The folders that install as ``primacy.<folder>``, read from setup.cfg where they are declared."""

from __future__ import annotations

import configparser
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _installed_folders() -> tuple[str, ...]:
    config = configparser.ConfigParser()
    config.read(ROOT / "setup.cfg")
    pairs = (line.split("=") for line in config["options"]["package_dir"].split("\n") if line)
    return tuple(folder.strip() for name, folder in pairs if name.strip().startswith("primacy."))


PACKAGES = _installed_folders()
