"""Kafka transactions: the coordinator (``coordinator``), its state machine (``states``), its peers on the
other brokers of a cluster (``peers``) and the shares a participant broker keeps (``participants``)."""
