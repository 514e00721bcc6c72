// One round trip with stompit, a Node.js STOMP client: send with receipts, subscribe in the
// ack mode asked for; in client and client-individual modes NACK the first delivery and ACK
// the rest. Settings come as JSON in argv[2]; the outcome is printed as one JSON line. Used
// by test_node_client.py.
'use strict';
const fs = require('fs');
const stompit = require('stompit');

const settings = JSON.parse(process.argv[2]);
const options = {
  host: settings.host,
  port: settings.port,
  connectHeaders: { host: 'primacy', 'heart-beat': '0,0' },
  timeout: 10000,
};
if (settings.login) {
  options.connectHeaders.login = settings.login;
  options.connectHeaders.passcode = settings.passcode;
}
if (settings.ca) {
  options.ssl = true;
  options.ca = [fs.readFileSync(settings.ca)];
}

const outcome = { receipts: 0, received: [], nacked: [], acks: 0, error: null };
const finish = (client, error) => {
  if (error) outcome.error = String(error.message || error);
  console.log(JSON.stringify(outcome));
  if (client) client.disconnect();
  process.exit(error ? 1 : 0);
};
setTimeout(() => finish(null, new Error('timed out')), 20000);

stompit.connect(options, (error, client) => {
  if (error) return finish(null, error);
  client.on('error', (e) => finish(client, e));
  const bodies = ['m1', 'm2', 'm3'];
  let receipted = 0;
  for (const body of bodies) {
    const frame = client.send({ destination: settings.destination, 'message-id': body }, {
      onReceipt: () => {
        outcome.receipts += 1;
        receipted += 1;
        if (receipted === bodies.length) subscribe(client);
      },
    });
    frame.write(body);
    frame.end();
  }
});

function subscribe(client) {
  client.subscribe({ destination: settings.destination, ack: settings.ack }, (error, message) => {
    if (error) return finish(client, error);
    message.readString('utf-8', (readError, body) => {
      if (readError) return finish(client, readError);
      if (settings.ack === 'auto') {
        outcome.received.push(body);
        if (outcome.received.length === 3) finish(client, null);
        return;
      }
      const redelivered = message.headers.redelivered === 'true';
      if (body === 'm1' && !redelivered && outcome.nacked.length === 0) {
        outcome.nacked.push(body);
        client.nack(message);
        return;
      }
      outcome.received.push(body);
      client.ack(message, {}, { onReceipt: () => {
        outcome.acks += 1;  // done once every ACK is durable, not when the last one is sent
        if (outcome.acks === 3) finish(client, null);
      } });
    });
  });
}
