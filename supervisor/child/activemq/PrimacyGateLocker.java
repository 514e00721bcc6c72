/*
 * ActiveMQ Classic behind primacy's warm standby gate (docs/operator-guide.md, "A warm
 * standby behind a gate"; the argument: docs/safety.md, "A warm standby behind a gate").
 *
 * ActiveMQ starts a persistence adapter's locker before the store opens its files, and a
 * locker's doStart may block: ActiveMQ's own slave waits there for its file lock. This one
 * waits for primacy's gate instead: one line (the node's epoch) on the pipe whose read end
 * the broker inherited at the descriptor PRIMACY_GATE_FD names, written only by the node's
 * guardian once the node is master. End of file means the gate will never open (the
 * guardian is gone): the JVM halts without touching the store.
 *
 * Once open, the gate is watched: the guardian holds its write end for as long as it
 * supervises this broker, so end of file later means the guardian is gone, and with it the
 * node's power to stop this broker on demotion. The guardian starts the broker with a
 * parent-death signal that kills it then; the watch is the second way out, for a broker
 * started by a wrapper that forked instead of exec'ing (the signal does not survive a fork).
 * The JVM halts at once (no orderly stop: that would write to the store), and keepAlive,
 * which ActiveMQ calls every lockKeepAlivePeriod, answers false from then on.
 *
 * Compile against the package's jars and put the class on the broker's classpath:
 *   javac -cp '/usr/share/activemq/lib/*' -d /usr/local/lib/primacy/activemq PrimacyGateLocker.java
 *   java ... -Dactivemq.classpath=/usr/local/lib/primacy/activemq -jar .../activemq.jar start ...
 */
package org.primacy;

import java.io.FileInputStream;
import java.io.IOException;
import org.apache.activemq.broker.AbstractLocker;
import org.apache.activemq.store.PersistenceAdapter;
import org.apache.activemq.util.ServiceStopper;

public class PrimacyGateLocker extends AbstractLocker {
    private FileInputStream gate;
    private volatile boolean gateClosed;
    private volatile boolean stopping;

    @Override
    public void configure(PersistenceAdapter adapter) {
        // Nothing of the adapter's: the gate is the node's, not a file in the store.
    }

    @Override
    protected void doStart() throws Exception {
        String fd = System.getenv("PRIMACY_GATE_FD");
        if (fd == null) {
            throw new IOException("PRIMACY_GATE_FD is not set: not started behind primacy's gate");
        }
        // The inherited descriptor, opened again through /proc: the same pipe, read end only.
        gate = new FileInputStream("/proc/self/fd/" + Integer.parseInt(fd));
        System.out.println("PRIMACY gate: the broker is loaded and waits behind the gate");
        StringBuilder epoch = new StringBuilder();
        while (true) {
            int b = gate.read();
            if (b < 0) {
                System.err.println("PRIMACY gate: closed for good (the guardian is gone); halting");
                Runtime.getRuntime().halt(1);
            }
            if (b == '\n') {
                break;
            }
            epoch.append((char) b);
        }
        System.out.println("PRIMACY gate: open for epoch " + epoch + "; opening the store");
        Thread watch = new Thread(this::watchGate, "primacy-gate-watch");
        watch.setDaemon(true);
        watch.start();
    }

    /** Blocks on the open gate until its end of file: the guardian is gone. */
    private void watchGate() {
        try {
            while (gate.read() >= 0) {
                // Nothing more is ever written after the epoch; read on until the end.
            }
        } catch (IOException e) {
            if (stopping) {
                return; // doStop closed the stream under us: an orderly stop
            }
        }
        if (stopping) {
            return;
        }
        gateClosed = true;
        System.err.println("PRIMACY gate: closed while serving (the guardian is gone); halting");
        Runtime.getRuntime().halt(1);
    }

    @Override
    public boolean keepAlive() {
        return !gateClosed;
    }

    @Override
    protected void doStop(ServiceStopper stopper) throws Exception {
        stopping = true;
        if (gate != null) {
            gate.close();
        }
    }
}
