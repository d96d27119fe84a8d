"""RocketMQ 4.9 master/slave replication (the HA protocol): sans-IO codec and trio glue."""
