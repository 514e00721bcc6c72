"""`python -m supervisor` is the same as the `primacy` command."""

import sys

from supervisor.cli import main

sys.exit(main())
