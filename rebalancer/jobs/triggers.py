"""When a job runs: ``--cron "0 3 * * *"`` or ``--every 5m``, as plain schedule values.

A schedule is stored as JSON (``schedule_to_json``) and turned into an APScheduler trigger only
when the scheduler needs one (``to_trigger``), so what the store holds is data that is checked
when read, never an object that is rebuilt blindly. The same checks run on what the user types
and on what the store holds; bad input raises TriggerError with one line saying what is wrong.

Crontab, not APScheduler, defines the fields: day of week 0 and 7 are Sunday (APScheduler 3
counts from Monday), and a day of month together with a day of week is refused because crontab
runs on either while APScheduler would run only on days matching both.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta, tzinfo
from typing import Any

from apscheduler.triggers.base import BaseTrigger
from apscheduler.triggers.cron import CronTrigger
from apscheduler.triggers.interval import IntervalTrigger

_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}
_DURATION = re.compile(r"(\d+(?:\.\d+)?)([smhd])")

MIN_INTERVAL = 60.0
"""The shortest ``--every``: one minute, cron's own resolution. A rebalance or an election run
records a run (and a rebalance a plan) each time; sub-minute schedules only pile those up."""

MAX_DURATION = 365 * 86400.0
"""The longest duration accepted anywhere (``--every``, ``--wait``, ``--poll``): a year."""

_WEEKDAYS = ("sun", "mon", "tue", "wed", "thu", "fri", "sat")
"""Crontab's day-of-week numbers: 0 (and 7) is Sunday."""


class TriggerError(ValueError):
    """A schedule that cannot be understood, or that makes no sense."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Cron:
    """Five crontab fields as the user gave them, in an IANA time zone."""

    expression: str
    timezone: str


@dataclass(frozen=True, slots=True, kw_only=True)
class Every:
    """A fixed interval, anchored at ``start`` (UTC): runs fall at start + k * seconds."""

    seconds: float
    start: datetime


Schedule = Cron | Every


def parse_duration(text: str) -> float:
    """``30s``, ``5m``, ``1h``, ``1d``, or combined (``1h30m``) -> seconds (> 0, at most a
    year)."""
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
    if total > MAX_DURATION:
        raise TriggerError(f"bad duration {text!r}: at most {format_duration(MAX_DURATION)}")
    return total


def make_schedule(*, cron: str | None = None, every: str | None = None,
                  timezone: str | None = None, first_run: datetime | None = None,
                  now: datetime | None = None) -> Schedule:
    """Exactly one of ``cron`` (five crontab fields) or ``every`` (a duration).

    ``timezone`` is the cron's zone (default: this host's local zone, stored with the job).
    An interval runs first at ``first_run`` (default: one interval from ``now``).
    """
    if (cron is None) == (every is None):
        raise TriggerError("give exactly one schedule: --cron 'M H DOM MON DOW' or --every 5m")
    now = now or datetime.now(UTC)
    if cron is not None:
        if first_run is not None:
            raise TriggerError("a cron schedule runs when its fields say; no first run time")
        zone = _zone_name(timezone) if timezone is not None else _local_zone_name()
        schedule: Schedule = Cron(expression=" ".join(cron.split()), timezone=zone)
    else:
        assert every is not None
        if timezone is not None:
            raise TriggerError("--timezone goes with --cron (an interval is the same in every "
                               "zone)")
        seconds = parse_duration(every)
        start = first_run if first_run is not None else now + timedelta(seconds=seconds)
        if start.tzinfo is None:
            raise TriggerError("the first run time needs a time zone")
        schedule = Every(seconds=seconds, start=start.astimezone(UTC))
    check_schedule(schedule, now=now)
    return schedule


def check_schedule(schedule: Schedule, *, now: datetime | None = None) -> None:
    """Raise TriggerError unless ``schedule`` is one partctl would have made: a valid crontab
    in a known zone that fires at least once more, or an interval of 1 minute to a year."""
    match schedule:
        case Cron():
            trigger = to_trigger(schedule)
            if trigger.get_next_fire_time(None, now or datetime.now(UTC)) is None:
                raise TriggerError(f"cron expression {schedule.expression!r} never fires "
                                   f"(no such date)")
        case Every(seconds=seconds):
            if not MIN_INTERVAL <= seconds <= MAX_DURATION:
                raise TriggerError(f"an interval of {format_duration(seconds)} is not between "
                                   f"{format_duration(MIN_INTERVAL)} and "
                                   f"{format_duration(MAX_DURATION)}")
        case _:
            raise TriggerError(f"not a schedule: {schedule!r}")


class _CronTrigger(CronTrigger):
    """APScheduler's cron trigger, remembering the schedule it was made from (for a job store
    that writes a job back)."""

    def __init__(self, schedule: Cron, **fields: Any) -> None:
        super().__init__(**fields)
        self.schedule = schedule


class _IntervalTrigger(IntervalTrigger):
    __slots__ = ("schedule",)

    def __init__(self, schedule: Every, **fields: Any) -> None:
        super().__init__(**fields)
        self.schedule = schedule


def schedule_of(trigger: Any) -> Schedule | None:
    """The schedule a trigger was made from by ``to_trigger``; None for any other trigger."""
    if isinstance(trigger, _CronTrigger | _IntervalTrigger):
        return trigger.schedule
    return None


def to_trigger(schedule: Schedule) -> BaseTrigger:
    """The APScheduler trigger for ``schedule`` (TriggerError if the fields are bad)."""
    match schedule:
        case Cron(expression=expression, timezone=zone):
            fields = expression.split()
            if len(fields) != 5:
                raise TriggerError(f"bad cron expression {expression!r}: Wrong number of "
                                   f"fields; got {len(fields)}, expected 5 (M H DOM MON DOW)")
            minute, hour, day, month, weekday = fields
            if not day.startswith("*") and not weekday.startswith("*"):
                raise TriggerError(
                    f"bad cron expression {expression!r}: give a day of the month or a day of "
                    f"the week, not both (crontab runs on either, APScheduler on both)")
            try:
                return _CronTrigger(schedule, minute=minute, hour=hour, day=day, month=month,
                                    day_of_week=_apscheduler_weekdays(weekday, expression),
                                    timezone=_zone(zone))
            except (ValueError, TypeError) as exc:
                raise TriggerError(f"bad cron expression {expression!r}: {exc}") from None
        case Every(seconds=seconds, start=start):
            try:
                return _IntervalTrigger(schedule, seconds=seconds, start_date=start,
                                        timezone=UTC)
            except (ValueError, OverflowError) as exc:
                raise TriggerError(f"bad interval {seconds!r}: {exc}") from None
    raise TriggerError(f"not a schedule: {schedule!r}")


def _apscheduler_weekdays(field: str, expression: str) -> str:
    """A crontab day-of-week field (0-7, Sunday = 0 or 7, names, ranges, steps) as the day
    names APScheduler reads the same way whatever its numbering."""
    if field == "*":
        return "*"
    days: set[int] = set()
    for item in field.lower().split(","):
        span, _, step_text = item.partition("/")
        try:
            step = int(step_text) if step_text else 1
            if step < 1:
                raise ValueError
            if span == "*":
                first, last = 0, 6
            else:
                lo, dash, hi = span.partition("-")
                first = _weekday(lo)
                last = _weekday(hi) if dash else (6 if step_text else first)
                if dash and hi in ("7", "sun") and first > 0:
                    last = 7  # 5-7: Friday to Sunday
        except ValueError:
            raise TriggerError(f"bad cron expression {expression!r}: bad day of week "
                               f"{item!r} (0-7 or sun-sat, Sunday is 0 or 7)") from None
        if first > last:
            raise TriggerError(f"bad cron expression {expression!r}: day-of-week range "
                               f"{span!r} runs backwards")
        days.update(d % 7 for d in range(first, last + 1, step))
    return ",".join(_WEEKDAYS[d] for d in sorted(days))


def _weekday(text: str) -> int:
    if text in _WEEKDAYS:
        return _WEEKDAYS.index(text)
    if text.isdigit() and 0 <= int(text) <= 7:
        return int(text) % 7 if text != "7" else 7
    raise ValueError(text)


def _zone(name: str) -> tzinfo:
    from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError, TypeError):
        raise TriggerError(f"unknown time zone {name!r}") from None


def _zone_name(name: str) -> str:
    _zone(name)
    return name


def _local_zone_name() -> str:
    """This host's IANA zone name (what APScheduler itself would use), UTC when unknown."""
    try:
        import tzlocal

        name = tzlocal.get_localzone_name()
        if name:
            _zone(name)
            return name
    except Exception:  # no zone configured, or one zoneinfo does not know
        pass
    return "UTC"


def schedule_to_json(schedule: Schedule) -> dict[str, Any]:
    match schedule:
        case Cron(expression=expression, timezone=zone):
            return {"cron": expression, "timezone": zone}
        case Every(seconds=seconds, start=start):
            return {"every": seconds, "start": start.astimezone(UTC).isoformat()}
    raise TriggerError(f"not a schedule: {schedule!r}")


def schedule_from_json(doc: Any, *, now: datetime | None = None) -> Schedule:
    """The schedule a stored job holds, checked as a typed one is (TriggerError otherwise)."""
    schedule: Schedule
    if isinstance(doc, dict) and set(doc) == {"cron", "timezone"} \
            and isinstance(doc["cron"], str) and isinstance(doc["timezone"], str):
        schedule = Cron(expression=doc["cron"], timezone=doc["timezone"])
    elif isinstance(doc, dict) and set(doc) == {"every", "start"} \
            and isinstance(doc["every"], int | float) and not isinstance(doc["every"], bool) \
            and isinstance(doc["start"], str):
        try:
            start = datetime.fromisoformat(doc["start"])
        except ValueError:
            raise TriggerError(f"bad interval start {doc['start']!r}") from None
        if start.tzinfo is None:
            raise TriggerError(f"interval start {doc['start']!r} has no time zone")
        schedule = Every(seconds=float(doc["every"]), start=start.astimezone(UTC))
    else:
        raise TriggerError(f"not a schedule: {str(doc)[:80]!r} (want {{'cron', 'timezone'}} "
                           f"or {{'every', 'start'}})")
    check_schedule(schedule, now=now)
    return schedule


def first_run_time(schedule: Schedule, *, now: datetime | None = None) -> datetime | None:
    """When a new job with this schedule runs first: an interval at its start, a cron at its
    next match after ``now``."""
    match schedule:
        case Every(start=start):
            return start
        case Cron():
            return to_trigger(schedule).get_next_fire_time(None, now or datetime.now(UTC))
    raise TriggerError(f"not a schedule: {schedule!r}")


def describe_schedule(schedule: Schedule) -> str:
    """A short human form: ``cron 0 3 * * *`` / ``every 5m``."""
    match schedule:
        case Cron(expression=expression, timezone=zone):
            return f"cron {expression}" + ("" if zone in ("UTC", "Etc/UTC") else f" {zone}")
        case Every(seconds=seconds):
            return "every " + format_duration(seconds)
    return str(schedule)


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
