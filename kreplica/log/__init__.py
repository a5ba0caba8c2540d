"""Storage: the segmented, Kafka-format log (see DESIGN.md "log/")."""
from .log_config import LogConfig

__all__ = ["LogConfig"]
