"""The named-task command program: `python3 task_command.py` (PYTHONPATH has the package)."""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from task_handlers import tasks  # noqa: E402

from conveyor.handler import command  # noqa: E402

command(tasks)
