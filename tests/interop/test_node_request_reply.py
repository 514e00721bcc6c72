"""Request/reply over a temporary queue with stompit, a Node.js STOMP client that is not
ours: the requester's ``reply-to:/temp-queue/replies`` reaches the replier rewritten to a name
it can send to, and the answer comes back to the requester alone (docs/stomp.md,
"Request/reply: temporary queues")."""

from __future__ import annotations

import json
import subprocess

import pytest

from tests.broker.nodes import Masters, eventually
from tests.interop.test_node_client import HERE, MISSING, NODE

SCRIPT = HERE / "stompit_request_reply.js"


def test_stompit_request_and_reply_over_a_temporary_queue(masters: Masters) -> None:
    if MISSING is not None:
        pytest.skip(MISSING)
    assert NODE is not None
    master = masters.start()
    settings = {"host": "127.0.0.1", "port": master.address[1]}
    result = subprocess.run(
        [NODE, str(SCRIPT), json.dumps(settings)],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=HERE,
    )
    outcome = json.loads(result.stdout.strip().splitlines()[-1])
    assert result.returncode == 0, (outcome, result.stderr)
    assert outcome["reply"] == "re: what time is it"
    assert outcome["correlationId"] == "c-1"
    assert outcome["replyTo"].startswith("/remote-temp-queue/")
    assert outcome["destination"] == "/temp-queue/replies"
    # Both connections are gone: so is the temporary queue.
    eventually(lambda: master.service.stats()["temp_queues"] == 0, "the queue gone")
