"""Protocol fuzzers for rokka (issue 19): hostile frames on the Kafka, broker and name-server ports.

``python -m benchmarks.fuzz --help``; ``make fuzz`` runs a million frames per port; the short CI run is
``interop/test_fuzz_short.py``.  See ``driver`` for the run, ``hostile`` / ``kafka_frames`` /
``remoting_frames`` / ``mutate`` for the generators and ``steady`` for the clients that must not notice.
"""
