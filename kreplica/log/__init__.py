"""Storage: the segmented, Kafka-format log (see DESIGN.md "log/")."""
from .leader_epoch_cache import LeaderEpochCache
from .log import Log, LogAppendInfo, LogSlice
from .log_config import LogConfig

__all__ = ["LeaderEpochCache", "Log", "LogAppendInfo", "LogConfig", "LogSlice"]
