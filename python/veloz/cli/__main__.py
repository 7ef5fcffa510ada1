"""`python -m veloz.cli`: the `veloz` command, run by this interpreter."""

import sys

from veloz.cli import main

sys.exit(main())
