"""The admin requests tools write and the controller serves: reassignments (and the claim
that keeps two runs apart), preferred elections, topic deletions, producer id blocks."""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping

from coordinator import layout
from coordinator.codecs import (
    PRODUCER_ID_BLOCK_SIZE,
    ProducerIdBlock,
    ReassignmentOwner,
    TopicPartition,
    decode_partitions,
    decode_reassignment,
    encode_partitions,
    encode_reassignment,
)
from coordinator.errors import (
    BadVersion,
    CoordinatorError,
    MultiFailed,
    NodeExists,
    NoNode,
)
from coordinator.metadata_base import (
    ControllerEpoch,
    MetadataBase,
    ProducerIdsExhausted,
    ReassignmentClaimLost,
    RequestInProgress,
    UnknownTopic,
    Versioned,
)
from coordinator.model import Check, Create, Delete, Op, SetData, Stat
from coordinator.retry import Retry

log = logging.getLogger(__name__)


class AdminNodes(MetadataBase):
    """Reassignment, preferred election, topic deletion and producer id block nodes."""

    # --- admin: reassignment -------------------------------------------------------------

    def reassignment(self) -> Versioned[dict[TopicPartition, tuple[int, ...]]] | None:
        try:
            data, stat = self._get(layout.REASSIGN_PARTITIONS)
        except NoNode:
            return None
        return Versioned(value=decode_reassignment(layout.REASSIGN_PARTITIONS, data),
                         version=stat.version)

    def request_reassignment(self, moves: Mapping[TopicPartition, Iterable[int]]) -> None:
        """Submit a reassignment (the admin side). Fails if one is still in progress."""
        try:
            self.coordinator.create(layout.REASSIGN_PARTITIONS, encode_reassignment(moves),
                                    make_parents=True)
        except NodeExists:
            raise RequestInProgress("a partition reassignment is already in progress") from None

    # --- admin: who executes the reassignment (partctl's own node) ------------------------

    def reassignment_and_owner(
        self,
    ) -> tuple[Versioned[dict[TopicPartition, tuple[int, ...]]] | None,
               tuple[ReassignmentOwner, Stat] | None]:
        """The pending moves and the run executing them (with its node's stat: its
        ``ephemeral_owner`` is that run's session), in one read."""
        node, owner = self._get_many([layout.REASSIGN_PARTITIONS,
                                      layout.REASSIGN_PARTITIONS_OWNER])
        moves = None if node is None else Versioned(
            value=decode_reassignment(layout.REASSIGN_PARTITIONS, node[0]), version=node[1].version)
        holder = None if owner is None else (
            ReassignmentOwner.decode(layout.REASSIGN_PARTITIONS_OWNER, owner[0]), owner[1])
        return moves, holder

    def claim_reassignment(
        self, owner: ReassignmentOwner,
        moves: Mapping[TopicPartition, Iterable[int]] | None = None, *,
        node_version: int | None = None,
    ) -> bool:
        """Become the run that executes the reassignment, in one atomic multi: the ephemeral
        owner node, with either the reassignment node created with ``moves`` (create-if-absent:
        of two runs, one wins) or a check that it is still at ``node_version`` (taking over the
        moves an earlier run of the same plan left). False, with nothing written, when another
        run, a tool or the controller came first: re-read and decide again."""
        ops: list[Op] = [Create(path=layout.REASSIGN_PARTITIONS_OWNER, data=owner.encode(),
                                ephemeral=True)]
        if moves is not None:
            ops.append(Create(path=layout.REASSIGN_PARTITIONS, data=encode_reassignment(moves)))
        else:
            assert node_version is not None, "taking over needs the node's version"
            ops.append(Check(path=layout.REASSIGN_PARTITIONS, version=node_version))
        try:
            self.coordinator.multi(ops)
        except MultiFailed as failure:
            if isinstance(failure.cause, NoNode) and failure.cause.path == layout.ADMIN:
                self.coordinator.ensure_path(layout.ADMIN)
                return False
            if isinstance(failure.cause, (NodeExists, NoNode, BadVersion)):
                return False
            raise failure.cause from None
        return True

    def submit_reassignment(self, moves: Mapping[TopicPartition, Iterable[int]],
                            node_version: int | None) -> bool:
        """The claiming run's write of the node: replaced at the version read (created when
        ``node_version`` is None), only while its owner node is there. False on a conflict
        (the controller wrote in between, or a tool created the node: re-read and decide
        again); :class:`ReassignmentClaimLost` when the owner node is gone."""
        data = encode_reassignment(moves)
        write: Op = (Create(path=layout.REASSIGN_PARTITIONS, data=data) if node_version is None
                     else SetData(path=layout.REASSIGN_PARTITIONS, data=data,
                                  version=node_version))
        try:
            self.coordinator.multi([Check(path=layout.REASSIGN_PARTITIONS_OWNER, version=0),
                                    write])
        except MultiFailed as failure:
            if failure.index == 0:
                raise ReassignmentClaimLost(
                    f"{layout.REASSIGN_PARTITIONS_OWNER} is gone (the session ended?)"
                ) from failure
            if isinstance(failure.cause, (NodeExists, NoNode, BadVersion)):
                return False
            raise failure.cause from None
        return True

    def release_reassignment(self, owner: ReassignmentOwner, *, retry: Retry | None = None
                             ) -> None:
        """Delete the owner node if it is still ``owner``'s, of this session. ``retry``, when
        given, replaces the client's policy for the read (a run ending in an outage releases
        once, without riding the outage out)."""
        c = self.coordinator
        try:
            data, stat = (retry or self.retry)(c.get, layout.REASSIGN_PARTITIONS_OWNER)
            held = ReassignmentOwner.decode(layout.REASSIGN_PARTITIONS_OWNER, data)
            if held.run == owner.run and stat.ephemeral_owner == c.session_id:
                c.delete(layout.REASSIGN_PARTITIONS_OWNER, stat.version)
        except (NoNode, BadVersion):
            pass

    def update_reassignment(
        self, epoch: ControllerEpoch, moves: Mapping[TopicPartition, Iterable[int]],
        version: int = -1,
    ) -> None:
        """The controller's rewrite of the pending moves; deletes the node when none are left."""
        if moves:
            op: Op = SetData(path=layout.REASSIGN_PARTITIONS, data=encode_reassignment(moves),
                             version=version)
        else:
            op = Delete(path=layout.REASSIGN_PARTITIONS, version=version)
        try:
            self.fenced(epoch, [op])
        except MultiFailed as failure:
            if not isinstance(failure.cause, NoNode):
                raise failure.cause from None

    # --- admin: preferred replica election -----------------------------------------------

    def preferred_election(self) -> list[TopicPartition] | None:
        try:
            data, _ = self._get(layout.PREFERRED_REPLICA_ELECTION)
        except NoNode:
            return None
        return decode_partitions(layout.PREFERRED_REPLICA_ELECTION, data)

    def request_preferred_election(self, partitions: Iterable[TopicPartition]) -> None:
        try:
            self.coordinator.create(layout.PREFERRED_REPLICA_ELECTION,
                                    encode_partitions(partitions), make_parents=True)
        except NodeExists:
            raise RequestInProgress("a preferred replica election is already in progress") from None

    def delete_preferred_election(self, epoch: ControllerEpoch) -> None:
        try:
            self.fenced(epoch, [Delete(path=layout.PREFERRED_REPLICA_ELECTION)])
        except MultiFailed as failure:
            if not isinstance(failure.cause, NoNode):
                raise failure.cause from None

    # --- admin: topic deletion -----------------------------------------------------------

    def topics_to_delete(self) -> list[str]:
        try:
            return self._children(layout.DELETE_TOPICS)
        except NoNode:
            return []

    def request_topic_deletion(self, topic: str) -> None:
        """ValueError for a name Kafka would refuse: ``a/partitions`` would otherwise find a
        node and ask the controller to delete topic ``a``."""
        layout.validate_topic(topic)
        if self.coordinator.exists(layout.topic(topic)) is None:
            raise UnknownTopic(topic)
        try:
            self.coordinator.create(layout.delete_topic(topic), make_parents=True)
        except NodeExists:
            pass  # already requested

    def complete_topic_deletion(self, epoch: ControllerEpoch, topic: str) -> None:
        """Remove a deleted topic's nodes, leaves first, and its deletion request (fenced)."""
        c = self.coordinator
        partitions = self.partitions_of(topic)
        layers: list[list[str]] = [
            [layout.partition_state(topic, p) for p in partitions],
            [layout.partition(topic, p) for p in partitions],
            [layout.partitions(topic)],
            # Kafka's order: the topic, its config, then the deletion request.
            [layout.topic(topic), layout.topic_config(topic), layout.delete_topic(topic)],
        ]
        for paths_ in layers:
            present = [p for p, item in zip(paths_, c.get_many(paths_), strict=True)
                       if item is not None]
            results = self.fenced_write_many(epoch, [Delete(path=p) for p in present])
            for result in results:
                if isinstance(result, CoordinatorError) and not isinstance(result, NoNode):
                    raise result

    # --- producer id blocks ---------------------------------------------------------------

    def producer_id_block(self) -> Versioned[ProducerIdBlock | None] | None:
        """The latest block of producer ids any broker claimed, with the node's version: a
        value of None when the node holds no data (the broker start-up creates it empty, as
        Kafka's does: no block claimed yet), None when the node does not exist at all."""
        try:
            data, stat = self._get(layout.LATEST_PRODUCER_ID_BLOCK)
        except NoNode:
            return None
        block = ProducerIdBlock.decode(layout.LATEST_PRODUCER_ID_BLOCK, data) if data else None
        return Versioned(value=block, version=stat.version)

    def claim_producer_id_block(
        self, broker_id: int, *, size: int = PRODUCER_ID_BLOCK_SIZE, max_conflicts: int = 100
    ) -> ProducerIdBlock:
        """Claim the next ``size`` producer ids for ``broker_id`` (Kafka's
        ZkProducerIdManager.getNewProducerIdBlock): read ``/latest_producer_id_block``, take
        the block after the one it holds (from 0 when it holds none), and write it
        conditionally on the version read; when another broker claimed in between, read and
        try again. Returns the block, which is this broker's alone.

        A connection lost during the write leaves its outcome unknown; the error goes to the
        caller, who may claim again: a block written without our knowing is skipped, never
        handed out twice. :class:`ProducerIdsExhausted` past the largest 64-bit id."""
        if size < 1:
            raise ValueError(f"a producer id block holds at least one id: {size}")
        c, path = self.coordinator, layout.LATEST_PRODUCER_ID_BLOCK
        for _ in range(max_conflicts):
            current = self.producer_id_block()
            start = 0 if current is None or current.value is None else (
                current.value.next_block_start)
            if start > (1 << 63) - size:
                raise ProducerIdsExhausted(
                    f"{path}: no producer ids left after {start - 1} for a block of {size}")
            block = ProducerIdBlock(broker=broker_id, block_start=start,
                                    block_end=start + size - 1)
            try:
                if current is None:
                    c.create(path, block.encode())
                else:
                    c.set(path, block.encode(), current.version)
            except (BadVersion, NodeExists, NoNode):
                log.debug("broker %d: %s changed while claiming a block; reading it again",
                          broker_id, path)
                continue
            log.info("broker %d claimed producer ids %d..%d", broker_id, block.block_start,
                     block.block_end)
            return block
        raise CoordinatorError(f"{path}: {max_conflicts} conflicting claims in a row")
