"""Real sockets: kreplica's typed messages between nodes over loopback TCP.

:mod:`.codec` is the wire format; :class:`.tcp_transport.TcpTransport` carries
requests and responses with the same interface as the in-process transport, so a
:class:`~kreplica.cluster.Cluster` runs over it unchanged (in real time).
"""
