"""Configuration of an ActiveMQ Classic broker for a shared file master/slave pair.

Pure functions: the generated ``activemq.xml`` (loopback, one STOMP connector,
KahaDB on the shared directory with a ``shared-file-locker``), a log4j 1.2
config that prints to stdout, and the ``java`` command line that runs the
Debian package's broker in the foreground.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from xml.sax.saxutils import quoteattr

ACTIVEMQ_HOME = Path("/usr/share/activemq")
RUN_JAR = ACTIVEMQ_HOME / "bin" / "activemq.jar"
# The locker that puts ActiveMQ behind primacy's warm standby gate (compile_gate_locker).
GATE_LOCKER_SOURCE = (
    Path(__file__).resolve().parents[2]
    / "supervisor"
    / "child"
    / "activemq"
    / "PrimacyGateLocker.java"
)
GATE_LOCKER_CLASS = "org.primacy.PrimacyGateLocker"


@dataclass(frozen=True)
class LockerTiming:
    """The two timings that decide how fast a slave takes over, in milliseconds."""

    label: str
    lock_acquire_sleep_interval_ms: int
    lock_keep_alive_period_ms: int

    def describe(self) -> str:
        return (
            f"{self.label} (lockAcquireSleepInterval {self.lock_acquire_sleep_interval_ms} ms,"
            f" lockKeepAlivePeriod {self.lock_keep_alive_period_ms} ms)"
        )


# ActiveMQ's own defaults: a slave polls every 10 s; the master never re-checks its lock.
DEFAULTS = LockerTiming("defaults", 10_000, 0)
# What a sysadmin who cares about failover time sets.
TUNED = LockerTiming("tuned", 1_000, 1_000)


@dataclass(frozen=True)
class AmqTls:
    """A ``stomp+ssl`` connector: its port and the PKCS12 key store holding the certificate."""

    port: int
    key_store: Path
    password: str


def activemq_xml(
    *,
    broker_name: str,
    stomp_port: int,
    kahadb_dir: Path,
    data_dir: Path,
    timing: LockerTiming,
    tls: AmqTls | None = None,
    gated: bool = False,
    openwire_port: int | None = None,
) -> str:
    """The broker's Spring XML: STOMP on loopback only, KahaDB on the shared directory.

    ``gated``: KahaDB's locker is primacy's gate (a warm standby) instead of ActiveMQ's
    shared-file locker. ``openwire_port``: an OpenWire connector too, for ActiveMQ's JMS client.

    JMX and advisory messages are off, as in Debian's own instance config
    (JMX) and because neither is used here; both only make ActiveMQ lighter,
    so the comparison errs in its favour. KahaDB keeps its default
    ``journalDiskSyncStrategy=always``, i.e. a persistent SEND is synced
    before its RECEIPT, as with primacy's ``sync`` policy.
    """
    name = quoteattr(broker_name)
    locker = f"""
          <shared-file-locker
              lockAcquireSleepInterval="{timing.lock_acquire_sleep_interval_ms}"/>
        """
    openwire = ""
    if openwire_port is not None:
        openwire = f"""
      <transportConnector name="openwire" uri="tcp://127.0.0.1:{openwire_port}"/>"""
    if gated:
        locker = f"""
          <bean xmlns="http://www.springframework.org/schema/beans" class="{GATE_LOCKER_CLASS}"/>
        """
    ssl_context = ssl_connector = ""
    if tls is not None:  # (elements of <broker> in alphabetical order, as its schema wants)
        ssl_context = f"""
    <sslContext>
      <sslContext keyStore={quoteattr("file:" + str(tls.key_store))}
                  keyStorePassword={quoteattr(tls.password)} keyStoreType="pkcs12"/>
    </sslContext>"""
        ssl_connector = f"""
      <transportConnector name="stomp+ssl" uri="stomp+ssl://127.0.0.1:{tls.port}"/>"""
    return f"""<beans xmlns="http://www.springframework.org/schema/beans"
  xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance"
  xsi:schemaLocation="http://www.springframework.org/schema/beans
    http://www.springframework.org/schema/beans/spring-beans-2.0.xsd
    http://activemq.apache.org/schema/core
    http://activemq.apache.org/schema/core/activemq-core.xsd">
  <broker xmlns="http://activemq.apache.org/schema/core" brokerName={name}
          dataDirectory={quoteattr(str(data_dir))} persistent="true"
          useJmx="false" advisorySupport="false">
    <persistenceAdapter>
      <kahaDB directory={quoteattr(str(kahadb_dir))}
              lockKeepAlivePeriod="{timing.lock_keep_alive_period_ms}">
        <locker>{locker}</locker>
      </kahaDB>
    </persistenceAdapter>{ssl_context}
    <transportConnectors>
      <transportConnector name="stomp" uri="stomp://127.0.0.1:{stomp_port}"/>{ssl_connector}{openwire}
    </transportConnectors>
  </broker>
</beans>
"""


# Debian's ActiveMQ logs through log4j 1.2 (lib/optional/log4j-1.2.jar); the
# harness reads "started" and "slave mode" from stdout, so INFO must reach it.
LOG4J_PROPERTIES = """\
log4j.rootLogger=INFO, stdout
log4j.appender.stdout=org.apache.log4j.ConsoleAppender
log4j.appender.stdout.layout=org.apache.log4j.PatternLayout
log4j.appender.stdout.layout.ConversionPattern=%d{HH:mm:ss.SSS} %-5p %m%n
log4j.logger.org.springframework=WARN
log4j.logger.org.apache.xbean=WARN
"""


def java_command(
    *,
    base: Path,
    conf_file: Path,
    heap_mb: int = 256,
    java: str = "java",
    classpath: Path | None = None,
    jvm_options: Sequence[str] = (),
) -> list[str]:
    """Run the broker in the foreground: what ``/usr/bin/activemq`` runs, minus its daemonising;
    ``jvm_options`` go first (the tests' short-lived JVM settings, say).

    The Debian wrapper backgrounds the JVM, forces ``/var/lib/activemq`` as
    its base and a 512 MiB heap, so the harness calls the run jar itself with
    its own base, conf and data directories.
    """
    conf = conf_file.parent
    return [
        java,
        *jvm_options,
        f"-Xmx{heap_mb}m",
        f"-Dactivemq.home={ACTIVEMQ_HOME}",
        f"-Dactivemq.base={base}",
        f"-Dactivemq.conf={conf}",
        f"-Dactivemq.data={base / 'data'}",
        f"-Dlog4j.configuration=file:{conf / 'log4j.properties'}",
        *([f"-Dactivemq.classpath={classpath}"] if classpath is not None else []),
        "-jar",
        str(RUN_JAR),
        "start",
        f"xbean:file:{conf_file}",
    ]


def write_instance(
    base: Path,
    *,
    broker_name: str,
    stomp_port: int,
    kahadb_dir: Path,
    timing: LockerTiming,
    tls: AmqTls | None = None,
    gated: bool = False,
    openwire_port: int | None = None,
) -> Path:
    """Create ``base/conf`` with the XML and log4j config; returns the XML's path."""
    conf = base / "conf"
    conf.mkdir(parents=True, exist_ok=True)
    (base / "data").mkdir(exist_ok=True)
    conf_file = conf / "activemq.xml"
    conf_file.write_text(
        activemq_xml(
            broker_name=broker_name,
            stomp_port=stomp_port,
            kahadb_dir=kahadb_dir,
            data_dir=base / "data",
            timing=timing,
            tls=tls,
            gated=gated,
            openwire_port=openwire_port,
        )
    )
    (conf / "log4j.properties").write_text(LOG4J_PROPERTIES)
    return conf_file


def compile_gate_locker(out: Path) -> Path:
    """Compile the gate's locker against the package's jars into ``out``: the directory to give
    the broker as ``-Dactivemq.classpath``."""
    if not (out / "org" / "primacy" / "PrimacyGateLocker.class").exists():
        out.mkdir(parents=True, exist_ok=True)
        subprocess.run(
            ["javac", "-cp", f"{ACTIVEMQ_HOME}/lib/*", "-d", str(out), str(GATE_LOCKER_SOURCE)],
            check=True, capture_output=True, timeout=120,
        )  # fmt: skip
    return out


def pkcs12_key_store(cert: Path, key: Path, out: Path, password: str) -> Path:
    """The certificate and key as a PKCS12 key store, which Java reads as is."""
    subprocess.run(
        ["openssl", "pkcs12", "-export", "-in", str(cert), "-inkey", str(key),
         "-out", str(out), "-passout", f"pass:{password}"],
        check=True, capture_output=True, timeout=60,
    )  # fmt: skip
    return out


def install_activemq(say: Callable[[str], None]) -> None:
    """Install Debian's ``activemq`` package if it is missing and this process may (root, apt)."""
    if RUN_JAR.exists() or os.geteuid() != 0 or shutil.which("apt-get") is None:
        return
    say("installing Debian's activemq package (apt-get install activemq) ...")
    environment = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    for command in (["apt-get", "update", "-qq"], ["apt-get", "install", "-y", "-qq", "activemq"]):
        done = subprocess.run(command, env=environment, capture_output=True, text=True)
        if done.returncode != 0:
            say(f"  {' '.join(command)} failed: {done.stderr.strip()[-300:]}")
            return


def missing_activemq() -> str | None:
    """Why ActiveMQ cannot run here, or None when the package and a JVM are present."""
    if not RUN_JAR.exists():
        return f"{RUN_JAR} not found: install Debian's package (apt-get install activemq)"
    if shutil.which("java") is None:
        return "no `java` on PATH (ActiveMQ needs a JDK 17)"
    return None
