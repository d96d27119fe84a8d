"""Crash-and-stop soak for rokka (issue 19): ``python -m benchmarks.soak`` / ``make soak``; see ``driver``."""
