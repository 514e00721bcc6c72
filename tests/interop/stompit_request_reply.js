// Request/reply with stompit, a Node.js STOMP client: a requester subscribes to its own
// /temp-queue/replies and sends a request with reply-to naming it; a replier on another
// connection answers to the reply-to it received, with the request's correlation-id. Settings
// come as JSON in argv[2]; the outcome is printed as one JSON line. Used by
// test_node_request_reply.py.
'use strict';
const stompit = require('stompit');

const settings = JSON.parse(process.argv[2]);
const options = {
  host: settings.host,
  port: settings.port,
  connectHeaders: { host: 'primacy', 'heart-beat': '0,0' },
  timeout: 10000,
};

const outcome = { replyTo: null, reply: null, correlationId: null, destination: null, error: null };
const clients = [];
const finish = (error) => {
  if (error) outcome.error = String(error.message || error);
  console.log(JSON.stringify(outcome));
  for (const client of clients) client.disconnect();
  process.exit(error ? 1 : 0);
};
setTimeout(() => finish(new Error('timed out')), 20000);

function readBody(message, then) {
  message.readString('utf-8', (error, body) => (error ? finish(error) : then(body)));
}

stompit.connect(options, (error, replier) => {
  if (error) return finish(error);
  clients.push(replier);
  replier.on('error', finish);
  // The replier answers whatever request comes, to wherever its reply-to says.
  replier.subscribe({ destination: '/queue/requests', ack: 'auto' }, (subError, request) => {
    if (subError) return finish(subError);
    outcome.replyTo = request.headers['reply-to'];
    const correlationId = request.headers['correlation-id'];
    readBody(request, (body) => {
      const frame = replier.send({ destination: outcome.replyTo, 'correlation-id': correlationId });
      frame.write(`re: ${body}`);
      frame.end();
    });
  });
  stompit.connect(options, (connectError, requester) => {
    if (connectError) return finish(connectError);
    clients.push(requester);
    requester.on('error', finish);
    requester.subscribe({ destination: '/temp-queue/replies', ack: 'auto' }, (subError, reply) => {
      if (subError) return finish(subError);
      outcome.correlationId = reply.headers['correlation-id'];
      outcome.destination = reply.headers.destination;
      readBody(reply, (body) => {
        outcome.reply = body;
        finish(null);
      });
    });
    const request = requester.send({
      destination: '/queue/requests',
      'reply-to': '/temp-queue/replies',
      'correlation-id': 'c-1',
    });
    request.write('what time is it');
    request.end();
  });
});
