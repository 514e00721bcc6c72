"""A writer process for the SIGKILL test: appends in a tight loop, prints each acknowledged id.

Run as ``python kill_child.py SHARE EPOCH THREADS``; never returns on its own.
"""

from __future__ import annotations

import sys
import threading
from pathlib import Path

from primacy.store.config import StoreConfig, SyncPolicy
from primacy.store.journal import JournalStore


def payload_for(message_id: str) -> bytes:
    return (message_id.encode() + b"|") * 20


def main() -> None:
    share, epoch, threads = Path(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
    config = StoreConfig(
        share=share,
        node_id=f"child-{epoch}",
        sync_policy=SyncPolicy.SYNC,
        segment_max_bytes=64 * 1024,
    )
    store = JournalStore.open(config, epoch=epoch, fencing_check=lambda: None)
    printing = threading.Lock()

    def append_forever(worker: int) -> None:
        count = 0
        while True:
            message_id = f"e{epoch}-t{worker}-{count}"
            store.append_send("q", message_id, payload_for(message_id)).result()
            with printing:
                sys.stdout.write(message_id + "\n")
                sys.stdout.flush()
            count += 1

    for worker in range(threads):
        threading.Thread(target=append_forever, args=(worker,), daemon=True).start()
    threading.Event().wait()


if __name__ == "__main__":
    main()
