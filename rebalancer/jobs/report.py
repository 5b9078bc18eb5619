"""One-line descriptions of job runs, for ``partctl jobs history`` and the scheduler's log."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rebalancer.store import JobRun, RunOutcome


def _spread(scores: Mapping[str, Any] | None, key: str) -> Any:
    value = (scores or {}).get(key)
    return value.get("spread") if isinstance(value, Mapping) else None


def _arrow(before: Any, after: Any) -> str:
    return f"{before}" if after is None else f"{before}->{after}"


def describe_run(run: JobRun) -> str:
    """What the run found and did, or why it failed, in one line."""
    if run.outcome is RunOutcome.FAILED or (run.error and run.outcome is not RunOutcome.RUNNING):
        return run.error or run.outcome.value
    if run.outcome is RunOutcome.RUNNING:
        return "running"
    details = run.details or {}
    if run.kind == "rebalance":
        parts = []
        after = run.scores_after or details.get("projected")
        if run.scores_before:
            prefix = "projected " if run.scores_after is None and after else ""
            parts.append(f"{prefix}replica spread "
                         f"{_arrow(_spread(run.scores_before, 'replicas_per_broker'), _spread(after, 'replicas_per_broker'))}")
            parts.append(f"leader spread "
                         f"{_arrow(_spread(run.scores_before, 'leaders_per_broker'), _spread(after, 'leaders_per_broker'))}")
        moves = details.get("moves")
        if moves is not None:
            verb = "planned" if run.outcome is RunOutcome.DRY_RUN else "moved"
            parts.append(f"{verb} {moves} partition(s)")
        return ", ".join(parts) or run.outcome.value
    if run.kind == "preferred-election":
        before = (run.scores_before or {}).get("imbalanced_brokers")
        after = (run.scores_after or {}).get("imbalanced_brokers")
        parts = []
        if before == [] and not details.get("count"):
            return "leaders are balanced"
        if before is not None:
            parts.append(f"imbalanced brokers {before}"
                         + (f"->{after}" if after is not None and after != before else ""))
        count = details.get("count")
        if count:
            parts.append(f"{count} election(s) requested")
        return ", ".join(parts) or run.outcome.value
    return run.outcome.value
