"""One error hierarchy for every backend.

Each backend translates its client's exceptions once, at its boundary, into these classes and
chains the original as ``__cause__``; callers never see a kazoo or gRPC exception.
"""

from __future__ import annotations


class CoordinatorError(Exception):
    """Base of every error the coordination layer raises."""


class InvalidURL(CoordinatorError):
    """A coordinator URL that cannot be parsed or names an unknown scheme."""


class NotAuthorized(CoordinatorError):
    """The coordinator refused the session's identity: wrong or missing credentials, or a
    node or key it may not read or change."""


class ConnectionFailed(CoordinatorError):
    """No server could be reached within the connect timeout."""


class ConnectionLoss(CoordinatorError):
    """The connection dropped (or is suspended); the outcome of the request is unknown.

    The only error worth retrying, and only for idempotent or version-checked requests.
    """


class OperationTimeout(ConnectionLoss):
    """A request got no answer within its deadline."""


class SessionExpired(CoordinatorError):
    """The session is gone: its ephemeral nodes were deleted by the server."""


class ClosedError(CoordinatorError):
    """The coordinator was closed explicitly."""


class NodeError(CoordinatorError):
    """An error about one node; ``path`` names it."""

    def __init__(self, path: str, message: str | None = None) -> None:
        self.path = path
        super().__init__(message or f"{self.describe}: {path}")

    describe = "node error"


class NoNode(NodeError):
    describe = "no such node"


class NodeExists(NodeError):
    describe = "node already exists"


class BadVersion(NodeError):
    describe = "version mismatch"


class NotEmpty(NodeError):
    describe = "node has children"


class NoChildrenForEphemerals(NodeError):
    describe = "ephemeral nodes cannot have children"


class InvalidPath(NodeError):
    describe = "invalid path"


class RequestTooLarge(CoordinatorError):
    """A single operation is larger than the backend accepts in one request."""


class MultiFailed(CoordinatorError):
    """An atomic multi was rejected; nothing in it was applied.

    ``index`` is the position of the first failing operation and ``cause`` its error.
    """

    def __init__(self, index: int, cause: CoordinatorError) -> None:
        self.index = index
        self.cause = cause
        super().__init__(f"multi rejected at op {index}: {cause}")


class GuardFailed(CoordinatorError):
    """The guard check of a guarded bulk write failed: a newer writer owns the guard node.

    Raised as soon as any chunk reports it; chunks that were not yet applied never will be.
    """

    def __init__(self, path: str, cause: CoordinatorError) -> None:
        self.path = path
        super().__init__(f"guard check failed on {path}: {cause}")
        self.__cause__ = cause
