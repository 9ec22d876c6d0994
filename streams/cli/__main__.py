"""`python -m streams.cli`: the same as `lychee`."""

import sys

from streams.cli import main

sys.exit(main())
