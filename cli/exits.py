"""What every ``primacy`` command shares: exit codes, the error line, logging.

One exit-code scheme for every command (the operator guide's "Exit codes" repeats it):
a code means the same whichever command returns it, and a command returns only the codes
its ``--help`` lists.
"""

from __future__ import annotations

import argparse
import logging
import sys
from typing import NoReturn

EXIT_OK = 0
EXIT_FAILURE = 1  # the command failed (or, for doctor, found warnings)
EXIT_REFUSED = 2  # a configuration, a file it names, or the share was refused
EXIT_USAGE = EXIT_REFUSED  # the name the commands written before the scheme use for it
EXIT_SHARE_UNUSABLE = 3
EXIT_CANNOT_LISTEN = 4
EXIT_FEWER_THAN_COUNT = 5  # `primacy consume --count N`: fewer than N arrived
EXIT_NO_MASTER = 6  # `primacy status`: no node serves as master
EXIT_COMMAND_LINE = 64  # sysexits' EX_USAGE: an unknown option, a missing or malformed argument
EXIT_OUTPUT_CLOSED = 141  # 128 + SIGPIPE: the reader of the output went away (`| head`)

EXIT_CODES_HELP = """exit codes:
  0  stopped normally
  1  unexpected failure (see the log)
  2  the configuration, or a file it names, is refused
  3  the share is unusable (missing, not writable, locks do not work)
  4  the HTTP address cannot be listened on
  64 bad command line (unknown option, missing or malformed argument)
"""


class CommandLineParser(argparse.ArgumentParser):
    """argparse, with a command line it cannot parse exiting 64 (EX_USAGE) rather than 2:
    2 is a refused configuration, something else to fix. Subcommands' parsers are of the
    same class (argparse makes them of their parent's)."""

    def error(self, message: str) -> NoReturn:
        self.print_usage(sys.stderr)
        self.exit(EXIT_COMMAND_LINE, f"{self.prog}: error: {message}\n")


def setup_logging(level: str) -> None:
    logging.basicConfig(
        level=level.upper(),
        stream=sys.stderr,
        format="%(asctime)s %(levelname)s %(name)s %(message)s",
    )


def fail(code: int, message: str) -> int:
    print(f"primacy: {message}", file=sys.stderr)
    return code
