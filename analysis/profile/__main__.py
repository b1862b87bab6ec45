import sys

from analysis.profile.cli import main

sys.exit(main())
