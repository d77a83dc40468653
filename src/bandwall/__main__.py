"""`python -m bandwall` (what torchrun runs with `-m bandwall`)."""

import sys

from bandwall.cli import main

sys.exit(main())
