"""A stored job as checked data: what kind, which function, when, with which arguments.

Every job partctl reads from its store passes ``check_stored`` before it is listed as runnable
or run: the kind must be one of ``JOB_FUNCTIONS`` and the import string the one registered for
it (so a row cannot name any other callable), the schedule one partctl would have made, and the
arguments exactly the job function's, each of the expected JSON type. A row that fails is
*broken*: listed with the reason, never run, never deleted behind the user's back.

The arguments never hold the store's URL: a run is told the store it runs from (``db``) and its
own id (``job_id``) when it starts, so no password is ever written into a job.
"""

from __future__ import annotations

import json
import math
import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from rebalancer.goals import GOALS
from rebalancer.jobs import tasks
from rebalancer.jobs.cluster import check_bootstrap, check_command_config, target_of
from rebalancer.jobs.errors import JobSpecError
from rebalancer.jobs.triggers import Schedule, TriggerError, schedule_from_json

JOB_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,99}")
RUNTIME_ARGUMENTS = ("job_id", "db")
"""Given to the job function when it runs; never stored."""


@dataclass(frozen=True, slots=True, kw_only=True)
class JobSpec:
    """A job that passed every check."""

    id: str
    kind: str
    func_ref: str
    schedule: Schedule
    arguments: Mapping[str, Any]
    next_run_time: datetime | None


Check = Callable[[str, Any], Any]


def _number(minimum: float | None = None, maximum: float | None = None, *,
            strict_minimum: bool = False, optional: bool = False) -> Check:
    def check(name: str, value: Any) -> Any:
        if value is None and optional:
            return None
        if isinstance(value, bool) or not isinstance(value, int | float) \
                or not math.isfinite(value):
            raise JobSpecError(f"argument {name} must be a number, not {value!r}")
        if minimum is not None and (value <= minimum if strict_minimum else value < minimum):
            bound = "more than" if strict_minimum else "at least"
            raise JobSpecError(f"argument {name} must be {bound} {minimum:g}, not {value!r}")
        if maximum is not None and value > maximum:
            raise JobSpecError(f"argument {name} must be at most {maximum:g}, not {value!r}")
        return value
    return check


def _integer(minimum: int | None = None) -> Check:
    def check(name: str, value: Any) -> Any:
        if isinstance(value, bool) or not isinstance(value, int):
            raise JobSpecError(f"argument {name} must be a whole number, not {value!r}")
        if minimum is not None and value < minimum:
            raise JobSpecError(f"argument {name} must be at least {minimum}, not {value!r}")
        return value
    return check


def _boolean(name: str, value: Any) -> Any:
    if not isinstance(value, bool):
        raise JobSpecError(f"argument {name} must be true or false, not {value!r}")
    return value


def _text(name: str, value: Any) -> Any:
    if not isinstance(value, str) or not value or len(value) > 1000:
        raise JobSpecError(f"argument {name} must be a non-empty string, not {value!r:.80}")
    return value


def _choice(choices: tuple[str, ...]) -> Check:
    def check(name: str, value: Any) -> Any:
        if value not in choices:
            raise JobSpecError(f"argument {name} must be one of {', '.join(choices)}, "
                               f"not {value!r:.80}")
        return value
    return check


def _fraction(name: str, value: Any) -> Any:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) \
            or not 0 <= value < 1:
        raise JobSpecError(f"argument {name} must be a number of at least 0 and below 1, "
                           f"not {value!r:.80}")
    return value


def _absolute_path(name: str, value: Any) -> Any:
    """A file a run reads: absolute, since the scheduler need not run where the job was
    added."""
    _text(name, value)
    if not os.path.isabs(value):
        raise JobSpecError(f"argument {name} must be an absolute path, not {value!r:.80}")
    return value


def _broker_ids(name: str, value: Any) -> Any:
    if not isinstance(value, list) or not all(
            isinstance(b, int) and not isinstance(b, bool) and b >= 0 for b in value):
        raise JobSpecError(f"argument {name} must be a list of broker ids, not {value!r:.80}")
    return value


def _replication_factors(name: str, value: Any) -> Any:
    """Goal replication-factor's topics: ``{"topic": rf, ...}``."""
    if value is None:
        return None
    if (not isinstance(value, Mapping) or not value or len(value) > 10_000
            or not all(isinstance(t, str) and 0 < len(t) <= 249 for t in value)
            or not all(isinstance(rf, int) and not isinstance(rf, bool) and 1 <= rf <= 1000
                       for rf in value.values())):
        raise JobSpecError(f"argument {name} must be an object of topics and their new "
                           f"replication factors (1 to 1000), not {value!r:.80}")
    return dict(value)


def _coordinator(name: str, value: Any) -> Any:
    from coordinator.errors import InvalidURL
    from coordinator.url import parse

    if value is None:
        return None
    _text(name, value)
    try:
        parse(value)
    except InvalidURL as exc:
        raise JobSpecError(f"argument {name}: {exc}") from None
    return value


def _bootstrap(name: str, value: Any) -> Any:
    return None if value is None else check_bootstrap(name, value)


def _throttle(name: str, value: Any) -> Any:
    """Bytes per second, as ``reassign execute --throttle``."""
    if value is None:
        return None
    return _integer(1)(name, value)


_TIMEOUT = _number(0, strict_minimum=True)
CLUSTER: Mapping[str, Check] = {
    "coordinator": _coordinator,
    "bootstrap": _bootstrap,
    "command_config": check_command_config,
    "connect_timeout": _TIMEOUT,
}
"""How every job names its cluster: exactly one of a coordinator URL and bootstrap servers
(rebalancer.jobs.cluster)."""
ARGUMENTS: Mapping[str, Mapping[str, Check]] = {
    tasks.REBALANCE: {
        **CLUSTER,
        "goal": _choice(GOALS),
        "brokers": _broker_ids,
        "count_slack": _fraction,
        "replication_factor": _replication_factors,
        "sizes": _absolute_path,
        "max_concurrent_moves": _integer(1),
        "throttle": _throttle,
        "dry_run": _boolean,
        "engine": _choice(tasks.ENGINES),
        "seed": _integer(),
        "spark_master": _text,
        "timeout": _number(0, strict_minimum=True, optional=True),
        "poll_interval": _TIMEOUT,
    },
    tasks.PREFERRED_ELECTION: {
        **CLUSTER,
        "percentage": _number(0, 100),
        "wait": _number(0, 365 * 86400.0),
    },
    tasks.SELF_HEAL: {
        **CLUSTER,
        "grace": _number(0, 365 * 86400.0),
        "replica_spread": _number(0, optional=True),
        "leader_spread": _number(0, optional=True),
        "disk_max_over_mean": _number(1, optional=True),
        "rack_violations": _boolean,
        "disk_usage": _number(0, 1, strict_minimum=True, optional=True),
        "max_concurrent_moves": _integer(1),
        "throttle": _throttle,
        "timeout": _number(0, strict_minimum=True, optional=True),
        "poll_interval": _TIMEOUT,
        "engine": _choice(tasks.ENGINES),
        "seed": _integer(),
    },
}
"""Per kind, every argument its function takes (but job_id and db) and how to check it."""
REQUIRED: Mapping[str, tuple[str, ...]] = {tasks.SELF_HEAL: ("grace",)}


def check_kind(kind: Any) -> str:
    if not isinstance(kind, str) or kind not in tasks.JOB_FUNCTIONS:
        raise JobSpecError(f"unknown job kind {kind!r:.80} (expected one of "
                           f"{', '.join(tasks.JOB_FUNCTIONS)})")
    return kind


def check_id(job_id: Any) -> str:
    if not isinstance(job_id, str) or not JOB_ID.fullmatch(job_id):
        raise JobSpecError(f"bad job id {job_id!r:.120}: letters, digits, '.', '_' and '-', "
                           f"at most 100, starting with a letter or digit")
    return job_id


def check_arguments(kind: str, arguments: Any) -> dict[str, Any]:
    """The job function's keyword arguments, checked: no unknown name, the required ones
    present, each of its type and range; the goal's brokers make sense."""
    if not isinstance(arguments, Mapping):
        raise JobSpecError(f"arguments must be a JSON object, not {arguments!r:.80}")
    schema = ARGUMENTS[check_kind(kind)]
    runtime = [k for k in arguments if k in RUNTIME_ARGUMENTS]
    if runtime:
        raise JobSpecError(f"argument {runtime[0]} is given when the job runs, not stored")
    unknown = sorted(str(k) for k in arguments if k not in schema)
    if unknown:
        raise JobSpecError(f"unknown argument {unknown[0]!r:.80} for a {kind} job (known: "
                           f"{', '.join(schema)})")
    missing = [k for k in REQUIRED.get(kind, ()) if k not in arguments]
    if missing:
        raise JobSpecError(f"argument {missing[0]} is missing")
    out = {name: schema[name](name, value) for name, value in arguments.items()}
    target = target_of(out)  # exactly one way in
    if kind == tasks.REBALANCE:
        # by bootstrap servers the cluster reports its sizes (DescribeLogDirs): no file needed
        sizes = out.get("sizes") or ("reported" if target.bootstrap is not None else None)
        tasks.goals_for(out.get("goal", "balance"), out.get("brokers", ()),  # JobSpecError
                        count_slack=out.get("count_slack"), sizes=sizes,
                        replication_factor=out.get("replication_factor"))
    try:
        json.dumps(out, allow_nan=False)
    except (TypeError, ValueError) as exc:  # pragma: no cover - the checks above exclude it
        raise JobSpecError(f"job arguments must be plain JSON values: {exc}") from None
    return out


def check_stored(stored: Any, *, now: datetime | None = None) -> JobSpec:
    """The job a stored row (rebalancer.store.StoredJob) describes, or JobSpecError saying why
    it cannot run. Only the registered import string for the row's kind is ever accepted, so
    nothing in a row can make partctl import or call anything else."""
    if stored.problem is not None:
        raise JobSpecError(str(stored.problem)[:500])
    job_id = check_id(stored.id)
    kind = check_kind(stored.kind)
    expected = tasks.JOB_FUNCTIONS[kind]
    if stored.func_ref != expected:
        raise JobSpecError(f"function {stored.func_ref!r:.120} is not partctl's {kind} job "
                           f"({expected})")
    schedule_doc = _json(stored.schedule, "schedule")
    try:
        schedule = schedule_from_json(schedule_doc, now=now)
    except TriggerError as exc:
        raise JobSpecError(f"schedule: {exc}") from None
    arguments = check_arguments(kind, _json(stored.arguments, "arguments"))
    return JobSpec(id=job_id, kind=kind, func_ref=expected, schedule=schedule,
                   arguments=arguments, next_run_time=_when(stored.next_run_time))


def _json(text: Any, what: str) -> Any:
    if not isinstance(text, str):
        raise JobSpecError(f"{what} is not JSON text: {text!r:.80}")
    try:
        return json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise JobSpecError(f"{what} is not valid JSON: {tasks.one_line(exc)}") from None


def _when(value: Any) -> datetime | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise JobSpecError(f"next run time {value!r:.80} is not a time")
    try:
        return datetime.fromtimestamp(value, UTC)
    except (OverflowError, OSError, ValueError):
        raise JobSpecError(f"next run time {value!r} is out of range") from None


def resolve(spec: JobSpec) -> Callable[..., Any]:
    """The job's function, imported from its registered import string (JobSpecError if that
    no longer resolves: a refactor renamed it)."""
    from apscheduler.util import ref_to_obj

    try:
        func = ref_to_obj(spec.func_ref)
    except (ImportError, LookupError, ValueError, TypeError) as exc:
        raise JobSpecError(f"function {spec.func_ref} does not resolve: {exc}") from None
    if not callable(func):
        raise JobSpecError(f"function {spec.func_ref} is not callable")
    return func
