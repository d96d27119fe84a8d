"""What both ends of a connection share, servers and clients alike.

* ``budget``: the process-wide connection and memory budgets of every listener, and the per-connection
  ``Lease`` / ``FrameClock`` a channel reports to;
* ``logs``: logging set-up and lines caused by a peer, rate-limited per address;
* ``remoting``: RocketMQ remoting: the codec (frames, headers, bodies, codes), the sans-IO connection, the
  trio channel that serves and sends requests, and the client library (name server, producer, consumers,
  admin, request signing) that the broker's own cluster machinery, the CLI and the Spark connector use.

Imports flow gateway -> net -> core (tests/test_layering.py): nothing here knows a broker.
"""
