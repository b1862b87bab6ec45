import sys

from analysis.compare.cli import main

sys.exit(main())
