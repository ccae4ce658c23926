"""`python -m rewardbox`: the command line."""

import sys

from rewardbox.cli import main

sys.exit(main())
