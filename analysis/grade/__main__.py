"""python -m analysis.grade SUBMISSION... : the grader alone (standard library only, so the
course platforms' images need no venv). `python -m analysis grade` is the same command."""

import sys

from analysis.grade.cli import main

sys.exit(main())
