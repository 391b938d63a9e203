"""The batch command program: `python3 batch_command.py` (PYTHONPATH has the package)."""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from batch_handlers import embed  # noqa: E402

from conveyor.handler import command_batch  # noqa: E402

command_batch(embed)
