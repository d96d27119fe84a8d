"""RocketMQ remoting, both ends: ``codec`` (bytes <-> ``RemotingCommand``, declared headers, bodies),
``connection`` (sans-IO), ``channel`` (trio: one connection serving handlers and sending requests),
``outbox`` (coalesced writes), ``signing`` (ACL request signatures), ``tls_stream`` and ``client``."""
