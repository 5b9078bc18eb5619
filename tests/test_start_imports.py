"""What a ``partctl`` process loads before it does anything: every one builds the whole command
line (its help names the SQL store's settings), brokers included, and the suite and a
cluster's restarts start hundreds of them. SQLAlchemy and Alembic (the store), PySpark, numpy
and APScheduler load only in the commands that use them; loading the store's ORM and
migrations was 70% of a broker's start-up import time."""

from __future__ import annotations

import subprocess
import sys

HEAVY = ("sqlalchemy", "alembic", "pyspark", "numpy", "apscheduler")


def test_the_command_line_and_a_broker_load_none_of_the_heavy_libraries() -> None:
    probe = ("import sys\n"
             "import partctl.cli\n"
             "partctl.cli.build_parser()\n"
             "import broker.process\n"
             f"print(' '.join(m for m in {HEAVY!r} if m in sys.modules))\n")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                          timeout=120, check=True)
    assert done.stdout.split() == []
