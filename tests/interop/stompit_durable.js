// A durable topic subscription with stompit, as an ActiveMQ application on Node writes one:
// CONNECT with client-id, SUBSCRIBE with activemq.subscriptionName, go away; messages are sent
// to the topic meanwhile; come back with the same names and receive them. Settings come as
// JSON in argv[2]; the outcome is printed as one JSON line. Used by test_node_client.py.
'use strict';
const stompit = require('stompit');

const settings = JSON.parse(process.argv[2]);
const options = (clientId) => ({
  host: settings.host,
  port: settings.port,
  connectHeaders: { host: 'primacy', 'heart-beat': '0,0', 'client-id': clientId },
  timeout: 10000,
});
const durable = {
  destination: settings.topic, ack: 'client-individual', 'activemq.subscriptionName': 'audit',
};
const outcome = { sent: 0, received: [], destinations: [], acks: 0, error: null };
const finish = (error) => {
  if (error) outcome.error = String(error.message || error);
  console.log(JSON.stringify(outcome));
  process.exit(error ? 1 : 0);
};
setTimeout(() => finish(new Error('timed out')), 20000);

// 1. Begin the subscription; DISCONNECT's receipt comes once the SUBSCRIBE is journaled.
stompit.connect(options('books'), (error, client) => {
  if (error) return finish(error);
  client.subscribe(durable, () => {});
  client.disconnect((closeError) => (closeError ? finish(closeError) : send()));
});

// 2. Send while the subscriber is away.
function send() {
  stompit.connect(options('producer'), (error, client) => {
    if (error) return finish(error);
    for (const body of ['t1', 't2', 't3']) {
      const frame = client.send({ destination: settings.topic }, {
        onReceipt: () => {
          outcome.sent += 1;
          if (outcome.sent === 3) client.disconnect(() => receive());
        },
      });
      frame.write(body);
      frame.end();
    }
  });
}

// 3. Come back with the same client-id and subscription name: what was kept arrives.
function receive() {
  stompit.connect(options('books'), (error, client) => {
    if (error) return finish(error);
    client.on('error', finish);
    client.subscribe(durable, (subscribeError, message) => {
      if (subscribeError) return finish(subscribeError);
      message.readString('utf-8', (readError, body) => {
        if (readError) return finish(readError);
        outcome.received.push(body);
        outcome.destinations.push(message.headers.destination);
        client.ack(message, {}, { onReceipt: () => {
          outcome.acks += 1;  // done once every ACK is durable
          if (outcome.acks === 3) client.disconnect(() => finish(null));
        } });
      });
    });
  });
}
