"""partctl's SQL store: scheduled jobs, plans, executions with per-partition progress, and job
runs.

SQLAlchemy 2 models; Alembic migrations (``migrations/``) own the tables; ``Store.open(url)``
upgrades the schema on first use. SQLite by default at ``$PARTCTL_HOME/partctl.db``
(``~/.local/share/partctl/partctl.db``), any SQLAlchemy URL via ``$PARTCTL_DB``.
"""

from rebalancer.store.engine import create_store_engine
from rebalancer.store.healing import AnomalyRecord, HealDecision, SeenAnomaly
from rebalancer.store.records import (
    ExecutionRecord,
    ExecutionStatus,
    JobExists,
    JobRun,
    MoveProgress,
    PartitionProgress,
    PlanRecord,
    RunConflict,
    RunOutcome,
    StoredJob,
    StoreError,
    canonical_json,
    scores_json,
    snapshot_digest,
)
from rebalancer.store.repository import Store
from rebalancer.store.urls import (
    ENV_DB,
    ENV_HOME,
    StoreURLError,
    default_db_path,
    display_url,
    resolve_db_url,
)

__all__ = [
    "AnomalyRecord",
    "ENV_DB",
    "ENV_HOME",
    "ExecutionRecord",
    "ExecutionStatus",
    "HealDecision",
    "JobExists",
    "JobRun",
    "MoveProgress",
    "PartitionProgress",
    "PlanRecord",
    "RunConflict",
    "RunOutcome",
    "SeenAnomaly",
    "Store",
    "StoreError",
    "StoreURLError",
    "StoredJob",
    "canonical_json",
    "create_store_engine",
    "default_db_path",
    "display_url",
    "resolve_db_url",
    "scores_json",
    "snapshot_digest",
]
