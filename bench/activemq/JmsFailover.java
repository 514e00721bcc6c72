/*
 * ActiveMQ's own JMS client (OpenWire) as its users run it, for bench/activemq/jms.py (the
 * warm standby's tests and bench/jms_failover.py):
 *   send URL N MS  sends N persistent text messages "m0".."m<N-1>" one at a time (each send
 *                returns once the broker acknowledged it), prints "sent mI BROKER" after each
 *                (BROKER: the name of the broker the connection is on, which a failover
 *                changes) and pauses MS milliseconds (so that a failover falls amid the sends);
 *   receive URL [N]  prints "got BODY" for every message until none comes for 10 s, or (with
 *                N) until "m0".."m<N-1>" have all come.
 * Compiled at run time against the jars of Debian's activemq package.
 */
import java.util.BitSet;
import javax.jms.Connection;
import javax.jms.DeliveryMode;
import javax.jms.Message;
import javax.jms.MessageConsumer;
import javax.jms.MessageProducer;
import javax.jms.Queue;
import javax.jms.Session;
import javax.jms.TextMessage;
import org.apache.activemq.ActiveMQConnection;
import org.apache.activemq.ActiveMQConnectionFactory;

public class JmsFailover {
    public static void main(String[] args) throws Exception {
        Connection connection = new ActiveMQConnectionFactory(args[1]).createConnection();
        connection.start();
        Session session = connection.createSession(false, Session.AUTO_ACKNOWLEDGE);
        Queue queue = session.createQueue("jms.failover");
        if (args[0].equals("send")) {
            MessageProducer producer = session.createProducer(queue);
            producer.setDeliveryMode(DeliveryMode.PERSISTENT);
            for (int i = 0; i < Integer.parseInt(args[2]); i++) {
                producer.send(session.createTextMessage("m" + i));
                String broker = ((ActiveMQConnection) connection).getBrokerName();
                System.out.println("sent m" + i + " " + broker);
                System.out.flush();
                Thread.sleep(Long.parseLong(args[3]));
            }
        } else {
            int expected = args.length > 2 ? Integer.parseInt(args[2]) : -1;
            BitSet seen = new BitSet();
            MessageConsumer consumer = session.createConsumer(queue);
            Message message;
            while (seen.cardinality() != expected && (message = consumer.receive(10000)) != null) {
                String body = ((TextMessage) message).getText();
                System.out.println("got " + body);
                System.out.flush();
                int index = body.startsWith("m") ? Integer.parseInt(body.substring(1)) : -1;
                if (index >= 0 && index < expected) {
                    seen.set(index);
                }
            }
        }
        connection.close();
    }
}
