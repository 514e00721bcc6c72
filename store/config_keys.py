"""How a configuration key is declared: its type, default, bounds, help and liveness.

The journal (``store/config.py``), the broker (``broker/config.py``) and the node
(``supervisor/config/__init__.py``, ``supervisor/config/exec_keys.py``) each declare their keys with
``key``, once; the node's TOML schema, the ``primacy run`` flags and the live keys
are read back from these declarations, and the operator guide's key tables are tested
against them. It lives in ``store`` because that is the lowest package with keys:
everything that has keys may import it.
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
    default_text: str | None = None,
    **bounds: Any,
) -> Any:
    """One configuration key: its default, bounds, help text (the flag's too), whether an edit of
    the config file applies it while the node runs, and its flag's extra names. A default that
    is derived from other keys (``None`` here) is described by ``default_text``."""
    extra: dict[str, JsonValue] = {
        "live": live,
        "metavar": metavar,
        "aliases": list(aliases),
        "default_text": default_text,
    }
    return Field(default, description=help, json_schema_extra=extra, **bounds)
