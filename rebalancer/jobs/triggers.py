"""When a job runs: ``--cron "0 3 * * *"`` or ``--every 5m``, parsed into APScheduler triggers.

Bad input raises TriggerError with one line saying what is wrong.
"""

from __future__ import annotations

import re
from datetime import tzinfo
from typing import Any

from apscheduler.triggers.cron import CronTrigger
from apscheduler.triggers.interval import IntervalTrigger

_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}
_DURATION = re.compile(r"(\d+(?:\.\d+)?)([smhd])")


class TriggerError(ValueError):
    """A schedule that cannot be understood."""


def parse_duration(text: str) -> float:
    """``30s``, ``5m``, ``1h``, ``1d``, or combined (``1h30m``) -> seconds (> 0)."""
    compact = text.strip().lower().replace(" ", "")
    pos, total = 0, 0.0
    for m in _DURATION.finditer(compact):
        if m.start() != pos:
            break
        total += float(m.group(1)) * _UNITS[m.group(2)]
        pos = m.end()
    if not compact or pos != len(compact):
        raise TriggerError(f"bad duration {text!r}: want e.g. 30s, 5m, 1h or 1h30m")
    if total <= 0:
        raise TriggerError(f"bad duration {text!r}: must be more than zero")
    return total


def make_trigger(*, cron: str | None = None, every: str | None = None,
                 timezone: str | tzinfo | None = None) -> CronTrigger | IntervalTrigger:
    """Exactly one of ``cron`` (five crontab fields) or ``every`` (a duration)."""
    if (cron is None) == (every is None):
        raise TriggerError("give exactly one schedule: --cron 'M H DOM MON DOW' or --every 5m")
    tz = _timezone(timezone)
    if cron is not None:
        try:
            return CronTrigger.from_crontab(cron, timezone=tz)
        except (ValueError, TypeError) as exc:
            raise TriggerError(f"bad cron expression {cron!r}: {exc}") from None
    assert every is not None
    return IntervalTrigger(seconds=parse_duration(every), timezone=tz)


def _timezone(value: str | tzinfo | None) -> Any:
    if value is None or not isinstance(value, str):
        return value
    from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

    try:
        return ZoneInfo(value)
    except (ZoneInfoNotFoundError, ValueError):
        raise TriggerError(f"unknown time zone {value!r}") from None


def describe_trigger(trigger: Any) -> str:
    """A short human form: ``cron 0 3 * * *`` / ``every 5m``."""
    if isinstance(trigger, CronTrigger):
        fields = {f.name: str(f) for f in trigger.fields}
        return "cron " + " ".join(fields[n] for n in ("minute", "hour", "day", "month",
                                                        "day_of_week"))
    if isinstance(trigger, IntervalTrigger):
        return "every " + format_duration(trigger.interval.total_seconds())
    return str(trigger)


def format_duration(seconds: float) -> str:
    out = []
    rest = int(seconds)
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60), ("s", 1)):
        if rest >= size:
            out.append(f"{rest // size}{unit}")
            rest %= size
    frac = seconds - int(seconds)
    if frac or not out:
        return f"{seconds:g}s"
    return "".join(out)
