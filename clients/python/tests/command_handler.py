"""The command-handler test program: `python3 command_handler.py` (PYTHONPATH has the package)."""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from fixture_handler import handle  # noqa: E402

from conveyor.handler import command  # noqa: E402

command(handle)
