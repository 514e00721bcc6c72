"""What every ``primacy`` command shares: exit codes, the error line, logging."""

from __future__ import annotations

import logging
import sys

EXIT_OK = 0
EXIT_FAILURE = 1
EXIT_USAGE = 2
EXIT_SHARE_UNUSABLE = 3
EXIT_CANNOT_LISTEN = 4
EXIT_FEWER_THAN_COUNT = 5  # `primacy consume --count N`: fewer than N arrived

EXIT_CODES_HELP = """exit codes:
  0  stopped normally
  1  unexpected failure (see the log)
  2  bad command line or configuration
  3  the share is unusable (missing, not writable, locks do not work)
  4  the HTTP address cannot be listened on
"""


def setup_logging(level: str) -> None:
    logging.basicConfig(
        level=level.upper(),
        stream=sys.stderr,
        format="%(asctime)s %(levelname)s %(name)s %(message)s",
    )


def fail(code: int, message: str) -> int:
    print(f"primacy: {message}", file=sys.stderr)
    return code
