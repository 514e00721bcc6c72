"""The operator guide's code blocks as operators copy them, for the load balancer tests and
for ``bench/activemq/under_primacy.py``, which runs the guide's HAProxy example before its nodes."""

from __future__ import annotations

import re
from pathlib import Path

GUIDE = Path(__file__).resolve().parents[2] / "docs" / "operator-guide.md"


def guide_example(heading: str) -> str:
    """The one code block under ``## heading`` in the operator guide: what operators copy."""
    section = GUIDE.read_text().split(f"\n## {heading}\n", 1)[1].split("\n## ", 1)[0]
    (block,) = re.findall(r"^```[^\n]*\n(.*?)^```", section, re.S | re.M)
    return str(block)


def substitute(text: str, replacements: dict[str, str]) -> str:
    """Replace each whole line (stripped) of the example; every one must be found exactly once."""
    lines = text.splitlines()
    for old, new in replacements.items():
        found = [i for i, line in enumerate(lines) if line.strip() == old]
        assert len(found) == 1, f"the guide's example no longer has the line {old!r}"
        indent = lines[found[0]][: len(lines[found[0]]) - len(lines[found[0]].lstrip())]
        lines[found[0]] = indent + new
    return "\n".join(lines) + "\n"


GUIDE_RUNTIME_API = "stats socket ipv4@10.0.0.9:9999 level admin"


def haproxy_config(
    front_port: int,
    backends: dict[str, tuple[int, int]],
    stats_port: int,
    runtime_api_port: int | None = None,
    replace: dict[str, str] | None = None,
) -> str:
    """The guide's HAProxy example on loopback ports, plus a frontend for the test to ask
    HAProxy whether it sees a master (nbsrv), which is not part of what operators copy.
    ``runtime_api_port``: its runtime API there (else none). ``replace``: settings changed
    for a measurement, each {setting: new line} replacing the one line starting with it
    (``default-server``, ``timeout connect``; a line that is not there fails)."""
    (a_stomp, a_http), (b_stomp, b_http) = backends["node-a"], backends["node-b"]
    api = (
        f"stats socket ipv4@127.0.0.1:{runtime_api_port} level admin"
        if runtime_api_port is not None
        else "# no runtime API"
    )
    example = substitute(
        guide_example("Load balancer: HAProxy"),
        {
            GUIDE_RUNTIME_API: api,
            "server node-a 10.0.0.1:61613 check port 8008": (
                f"server node-a 127.0.0.1:{a_stomp} check port {a_http}"
            ),
            "server node-b 10.0.0.2:61613 check port 8008": (
                f"server node-b 127.0.0.1:{b_stomp} check port {b_http}"
            ),
            "bind :61613": f"bind 127.0.0.1:{front_port}",
        },
    )
    for setting, line in (replace or {}).items():
        example = replace_setting(example, setting, line)
    return f"""{example}
frontend test_sees_a_master
    mode http
    timeout client 5s
    bind 127.0.0.1:{stats_port}
    http-request return status 200 if {{ nbsrv(primacy_stomp) ge 1 }}
    http-request return status 503
"""


def warm_haproxy_lines() -> list[str]:
    """The backend lines of the warm-standby recipe ("HAProxy in front of a warm group")."""
    recipe = GUIDE.read_text().split("**HAProxy in front of a warm group.**", 1)[1]
    block = re.findall(r"^```[^\n]*\n(.*?)^```", recipe, re.S | re.M)[0]
    return [line.strip() for line in str(block).splitlines() if line.strip()]


def warm_haproxy_config(
    front_port: int, backends: dict[str, tuple[int, int]], lines: list[str] | None = None
) -> str:
    """The general example (without its runtime API) with the warm recipe's lines (or
    ``lines``) in its backend: each replaces the example's line of the same setting
    (``timeout connect``, ``timeout check``, ``default-server``), or is added."""
    lines = warm_haproxy_lines() if lines is None else lines
    (a_stomp, a_http), (b_stomp, b_http) = backends["node-a"], backends["node-b"]
    config = substitute(
        guide_example("Load balancer: HAProxy"),
        {
            GUIDE_RUNTIME_API: "# no runtime API",
            "server node-a 10.0.0.1:61613 check port 8008": (
                f"server node-a 127.0.0.1:{a_stomp} check port {a_http}"
            ),
            "server node-b 10.0.0.2:61613 check port 8008": (
                f"server node-b 127.0.0.1:{b_stomp} check port {b_http}"
            ),
            "bind :61613": f"bind 127.0.0.1:{front_port}",
        },
    )
    for line in lines:
        words = line.split()
        setting = " ".join(words[:2]) if words[0] == "timeout" else words[0]
        config = replace_setting(config, setting, line)
    return config


def replace_setting(config: str, setting: str, line: str) -> str:
    """``config`` with the one line that starts with ``setting`` (stripped) replaced by
    ``line``, or with ``line`` added after the backend's first line when the example has no
    such setting and ``line`` is not empty."""
    lines = config.splitlines()
    found = [i for i, text in enumerate(lines) if text.strip().startswith(setting + " ")]
    assert len(found) <= 1, f"the guide's example has {setting!r} more than once"
    if found:
        lines[found[0]] = "    " + line if line else ""
    elif line:
        at = next(i for i, text in enumerate(lines) if text.startswith("backend "))
        lines.insert(at + 1, "    " + line)
    return "\n".join(lines) + "\n"
