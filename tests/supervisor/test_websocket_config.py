"""The ``stomp_websocket`` key: a HOST:PORT of its own, next to ``stomp``."""

from __future__ import annotations

from pathlib import Path

import pytest

from primacy.supervisor.config import ConfigError, load_config


def test_stomp_websocket_is_a_listener_of_the_stomp_broker(tmp_path: Path) -> None:
    settings = {"node_id": "a", "share": tmp_path, "stomp": "127.0.0.1:61613"}
    config = load_config(None, {**settings, "stomp_websocket": "127.0.0.1:61614"})
    assert config.stomp_websocket == "127.0.0.1:61614"
    assert load_config(None, settings).stomp_websocket is None  # off unless given


@pytest.mark.parametrize(
    ("settings", "refusal"),
    [
        ({"stomp_websocket": "127.0.0.1:61614"}, "give stomp too"),
        ({"stomp": "127.0.0.1:61613", "stomp_websocket": "61614"}, "is not HOST:PORT"),
        ({"stomp": "127.0.0.1:61613", "stomp_websocket": "0.0.0.0:61613"}, "same port"),
        ({"stomp": "127.0.0.1:61613", "stomp_websocket": "localhost:8008"}, "same port"),
    ],
)
def test_stomp_websocket_refused_without_stomp_or_on_a_taken_port(
    tmp_path: Path, settings: dict[str, object], refusal: str
) -> None:
    with pytest.raises(ConfigError, match=refusal):
        load_config(None, {"node_id": "a", "share": tmp_path, **settings})
