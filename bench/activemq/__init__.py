"""Helpers for ``bench/compare_activemq.py``: ActiveMQ Classic brokers, the STOMP workload, figures.

``config`` and ``figures`` are pure (no processes, no sockets) and unit
tested; ``brokers`` starts and kills real processes; ``workload`` talks STOMP.
"""
