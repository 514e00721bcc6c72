"""`python -m primacy.cli` is the same as the `primacy` command."""

import sys

from primacy.cli.main import main

sys.exit(main())
