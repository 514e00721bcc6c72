"""How the tests start the JVMs they run for a minute or two (Spark, ZooKeeper, ActiveMQ and its
JMS client): the quick compiler only, since C2's optimising costs more CPU than it returns in one
short run (one local replay 55 -> 39 s of CPU; an ActiveMQ start 1.4-1.8 -> 1.0 s), and the
serial collector. The benchmarks run ActiveMQ as its users do, without these."""

from __future__ import annotations

SHORT_LIVED_JVM_OPTIONS = ("-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC")
SHORT_LIVED_JVM = " ".join(SHORT_LIVED_JVM_OPTIONS)  # as one string, for SPARK_*_OPTS and the like
