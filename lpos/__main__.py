"""`python -m lpos ...`: the command line (lpos.cli)."""
import sys

from lpos.cli import main

sys.exit(main())
