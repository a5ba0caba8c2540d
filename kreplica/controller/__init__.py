"""The controller, sans-I/O (seeds 000-003).

Public API (what ``cluster.py``/``broker.py`` and the simulator call)::

    from kreplica.controller import KafkaController
    c = KafkaController(broker_id, KafkaZkClient(session, scheduler), channel, scheduler,
                        kreplica.config.validate(cfg))
    c.startup()                     # stand for election (ephemeral /controller)
    c.is_active; c.epoch            # whether this broker controls, and its controller epoch
    c.shutdown_broker(broker_id)    # controlled shutdown -> set[TopicPartition] still led
    c.handle_controlled_shutdown(ControlledShutdownRequest) -> ControlledShutdownResponse
    c.elect_preferred_leaders(tps)  # -> {tp: error} for those not moved
    c.check_and_trigger_partition_rebalance()   # also runs on its own timer
    c.resign(); c.shutdown()        # stop acting / stop standing
    c.event_listener = fn           # fn(now_ms, event): every typed event processed (.events)
    c.reassignment_step_hook = fn   # fn(tp, step) after each of the 12 steps (fault injection)

``channel.send(broker_id, request, on_response)`` delivers LeaderAndIsr,
UpdateMetadata and StopReplica requests (every one carries the controller
epoch) and later calls ``on_response(response)``.  Everything else -- new
topics, deletions, reassignments, preferred elections, broker failures, ISR
changes -- arrives through the metadata store's watches, written with
:class:`kreplica.meta.KafkaZkClient` by brokers and admin tools.  Pieces, each
its own module: :mod:`.context`, :mod:`.leader_selectors`,
:mod:`.partition_state_machine`, :mod:`.replica_state_machine`,
:mod:`.request_batch`, :mod:`.state_writer`, :mod:`.transitions`, :mod:`.events`,
:mod:`.reassignment`, :mod:`.topic_deletion_manager`, :mod:`.controller`.
"""
from .context import ControllerContext, PartitionReplica
from .controller import KafkaController
from .leader_selectors import Election
from .partition_state_machine import PartitionState
from .replica_state_machine import ReplicaState

__all__ = [
    "ControllerContext", "Election", "KafkaController", "PartitionReplica", "PartitionState", "ReplicaState",
]
