"""How a configuration key is declared: its type, default, bounds, help and liveness.

``supervisor/config.py`` and ``supervisor/broker_keys.py`` declare every key with
``key``; the TOML schema, the ``primacy run`` flags and the live keys are read
back from these declarations.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import AllowInfNan, Field, JsonValue, Strict

# Strict: a TOML ``"250"`` is not an integer, ``1`` is not a boolean, ``inf`` is no window.
Int = Annotated[int, Strict()]
Float = Annotated[float, Strict(), AllowInfNan(False)]
Bool = Annotated[bool, Strict()]


def key(
    default: Any,
    help: str,
    *,
    live: bool = False,
    metavar: str | None = None,
    aliases: tuple[str, ...] = (),
    **bounds: Any,
) -> Any:
    """One configuration key: its default, bounds, help text (the flag's too), whether an edit of
    the config file applies it while the node runs, and its flag's extra names."""
    extra: dict[str, JsonValue] = {"live": live, "metavar": metavar, "aliases": list(aliases)}
    return Field(default, description=help, json_schema_extra=extra, **bounds)
