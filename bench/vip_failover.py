"""kill -9 of the master -> first and third RECEIPT through keepalived's virtual IP (issue 46),
with the operator guide's keepalived example as operators copy it.

Needs root, ``ip`` and Debian's ``keepalived``. Three network namespaces, so nothing of the
host's own network changes: ``i46c`` holds a bridge and the client, ``i46a`` and ``i46b``
each one primacy node (built-in broker on 0.0.0.0:61613, HTTP on 0.0.0.0:8008) and one
keepalived, joined to the bridge by a veth pair. The virtual IP is 10.46.0.100. A stock
stomp.py producer (``bench/activemq/workload.py``) sends receipted messages to it; each kill
-9 of the master's supervisor is timed to the first and third RECEIPT after it, the killed
node is restarted, and both namespaces are sampled every 50 ms for the address held twice.
Everything (namespaces, processes) is removed at the end.

    python bench/vip_failover.py --kills 5
"""

from __future__ import annotations

import argparse
import logging
import random
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.activemq.workload import FailoverSender, StockStompClient, drain
from tests.harness.vip import STOMP_PORT, VIP, VipGroup, unavailable_reason

QUEUE = "/queue/vip-failover"


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--kills", type=int, default=5)
    args = parser.parse_args()
    logging.getLogger("stomp.py").setLevel(logging.CRITICAL)
    why_not = unavailable_reason()
    if why_not:
        sys.exit(why_not)
    firsts: list[float] = []
    thirds: list[float] = []
    twice = [0, 0]
    stop = threading.Event()

    with tempfile.TemporaryDirectory(prefix="primacy-bench-vip-") as workdir:
        bench = VipGroup(Path(workdir), "i46")

        def sample() -> None:
            while not stop.wait(0.05):
                twice[1] += 1
                twice[0] += bench.held_twice()

        sender = None
        sampler = threading.Thread(target=sample, daemon=True)
        try:
            bench.start()
            bench.settled()
            # This thread joins the client's namespace: the producer reaches the address there.
            bench.enter_client_namespace()
            sender = FailoverSender(StockStompClient([(VIP, STOMP_PORT)]), QUEUE, "vip")
            sampler.start()
            for index in range(args.kills):
                master = bench.settled()
                sender.resume()
                sender.wait_receipts(10)
                time.sleep(random.uniform(0, 0.02))
                generation = sender.generation
                killed_at = bench.kill(master)
                sender.first_receipt_after(killed_at, generation, 60)
                sender.wait_receipts(3)
                sender.pause()
                after = [t for t, g, _ in sender.records if t >= killed_at and g > generation]
                firsts.append(after[0] - killed_at)
                thirds.append(after[2] - killed_at)
                print(
                    f"  kill {index + 1}: first {firsts[-1] * 1000:.0f} ms, "
                    f"third {thirds[-1] * 1000:.0f} ms",
                    flush=True,
                )
                bench.start_node(master)
            receipted = sender.receipted_ids()
            sender.close()
            sender = None
            delivered = drain((VIP, STOMP_PORT), QUEUE, idle_s=2.0, limit_s=120)
            lost = len(set(receipted) - set(delivered))
        finally:
            stop.set()
            if sender is not None:
                sender.close()
            bench.close()
    print()
    print(
        f"| keepalived, the guide's example | {statistics.median(firsts) * 1000:.0f} / "
        f"{max(firsts) * 1000:.0f} | {statistics.median(thirds) * 1000:.0f} / "
        f"{max(thirds) * 1000:.0f} | address held twice: {twice[0]} of {twice[1]} samples "
        f"| {lost} of {len(receipted)} |"
    )


if __name__ == "__main__":
    main()
