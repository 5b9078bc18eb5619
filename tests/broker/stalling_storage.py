"""A remote storage manager for broker processes under test (``remote.log.storage.manager.class
.name=tests.broker.stalling_storage:StallingStorage``): the filesystem or S3 manager the URL
names, whose copies stall midway while the file ``$PARTCTL_TEST_STALL_DIR/stall`` exists, so a
test can SIGKILL the broker in the middle of a copy.

Midway is just before the commit point: the auxiliary files (offset and time index, leader-epoch
checkpoint, producer snapshot) are in the store under their final names, the ``.log`` is not.
The stall is announced by creating ``$PARTCTL_TEST_STALL_DIR/stalled``. The S3 endpoint comes
from ``$PARTCTL_TEST_S3_ENDPOINT`` (a class named by the config gets only the URL)."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from replication.tiered.filesystem import FileSystemRemoteStorageManager
from replication.tiered.s3 import S3RemoteStorageManager

__all__ = ["StallingStorage"]

STALL_DIR = "PARTCTL_TEST_STALL_DIR"
S3_ENDPOINT = "PARTCTL_TEST_S3_ENDPOINT"


def _stall_if_asked() -> None:
    directory = Path(os.environ[STALL_DIR])
    if (directory / "stall").exists():
        (directory / "stalled").touch()
        while True:  # until the test kills this process
            time.sleep(1)


class _StallingStore:
    """An S3 object store whose put of a ``.log`` object stalls first."""

    def __init__(self, store: Any) -> None:
        self._store = store

    def put_file(self, name: str, path: str) -> None:
        if name.endswith(".log"):
            _stall_if_asked()
        self._store.put_file(name, path)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)


def StallingStorage(url: str, *, broker_id: int) -> Any:  # noqa: N802 (a factory, as a class)
    if urlparse(url).scheme == "s3":
        manager = S3RemoteStorageManager(url, endpoint_url=os.environ[S3_ENDPOINT])
        manager.store = _StallingStore(manager.store)  # type: ignore[assignment]
        return manager

    def stage(step: str) -> None:
        if step == "renamed-leader_epoch_checkpoint":
            _stall_if_asked()
    return FileSystemRemoteStorageManager(Path(urlparse(url).path), stage=stage)
