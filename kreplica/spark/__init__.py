"""kreplica on Spark (PySpark): the ``kreplica`` data source and a session helper.

pyspark is an optional dependency (``pip install 'kreplica[spark]'``), so nothing
here imports it until used::

    from kreplica.spark import local_session
    spark = local_session()              # registers the "kreplica" source
    df = spark.read.format("kreplica").option("path", data_dir).option("topic", "t").load()

A session built elsewhere takes the source with ``kreplica.spark.register(spark)``, which
also turns on ``spark.sql.python.filterPushdown.enabled`` (without it Spark refuses every
read of a Python source that takes filters).
"""
from __future__ import annotations

__all__ = ["local_session", "register", "KReplicaDataSource", "skipped_batches", "skipped_regions"]


def __getattr__(name: str):
    if name in ("local_session", "register"):
        from . import session

        return getattr(session, name)
    if name in ("KReplicaDataSource", "skipped_batches", "skipped_regions"):
        from . import datasource

        return getattr(datasource, name)
    raise AttributeError(name)
