import sys

from lpos.cli import main

sys.exit(main())
