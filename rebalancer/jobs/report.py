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
    if run.kind == "self-heal":
        return _describe_healing(run, details)
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


def _describe_healing(run: JobRun, details: Mapping[str, Any]) -> str:
    """``broker-gone broker 4 (120s); act: remove-brokers 4, moved 7 partition(s)``."""
    seen = details.get("anomalies")
    decision = details.get("decision")
    if decision == "wait":  # the reason names the anomalies waited for and their ages
        return f"wait: {details.get('reason')}"
    parts = []
    if isinstance(seen, list) and seen:
        shown = [f"{a.get('kind')} {a.get('subject')} ({a.get('age', 0):.0f}s)"
                 for a in seen[:5] if isinstance(a, Mapping)
                 and isinstance(a.get("age", 0), int | float)]
        parts.append("; ".join(shown) + (f" and {len(seen) - 5} more" if len(seen) > 5 else ""))
    elif isinstance(seen, list):
        parts.append("no anomaly")
    if decision == "act":
        moves = details.get("moves")
        brokers = details.get("brokers") or []
        verb = "moved" if run.outcome is RunOutcome.SUCCEEDED else "planned"
        parts.append(f"act: {details.get('action')}"
                     + (f" {','.join(map(str, brokers))}" if brokers else "")
                     + (f", {verb} {moves} partition(s)" if moves is not None else ""))
    elif decision == "skip":
        parts.append(f"{decision}: {details.get('reason')}")
    return "; ".join(str(p) for p in parts) or run.outcome.value
