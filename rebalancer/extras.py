"""Optional dependencies: imported where a feature needs them, with a clear error when absent.

The base install plans, executes and schedules on the local engine. Spark planning (pyspark,
pandas) and Parquet snapshots (pyarrow) come with the ``spark`` extra; a user who asks for one
of them without it gets one line saying what to install, not an ImportError's traceback.
"""

from __future__ import annotations

import importlib
from types import ModuleType

__all__ = ["ExtraNotInstalled", "import_extra"]


class ExtraNotInstalled(ValueError):
    """A feature needs a package of an extra that is not installed (a ValueError, so callers
    that report bad input report this the same way, as one line)."""


def import_extra(module: str, *, extra: str, feature: str) -> ModuleType:
    """``importlib.import_module(module)``, or ExtraNotInstalled naming the extra to install."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        package = module.partition(".")[0]
        raise ExtraNotInstalled(f"{package} is not installed; it is needed for {feature}: "
                                f"pip install 'partctl[{extra}]'") from exc
