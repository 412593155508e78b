// Preloaded by bench/send.mjs into every process it measures (`node --require <this file> …`): counts
// the PostgreSQL requests and round trips of node-postgres in this process, and answers the counts over
// the IPC channel the bench opened ({ rrsBench: 'pg-count' } → { rrsBench: 'pg-count', requests,
// roundTrips }). No server restart (pg_stat_statements would need shared_preload_libraries) and no
// proxy hop in the measured path.
//
// A request is what the client waits on: a simple Query ('Q'; BEGIN, COMMIT, a multi-statement text)
// or an extended-protocol Sync ('S', one parameterized query). A round trip starts when a connection
// with nothing outstanding sends a request, and lasts until every outstanding request has had its
// ReadyForQuery ('Z'). Without pipelining the two figures are equal; in node-postgres's pipeline mode
// requests sent while others are outstanding share their round trip.
'use strict';
const { createRequire } = require('node:module');
const { join, resolve } = require('node:path');

const Connection = createRequire(join(resolve(__dirname, '..', '..'), 'package.json'))('pg/lib/connection');
const counts = { requests: 0, roundTrips: 0 };
const outstanding = Symbol('rrsBenchOutstanding');

function requestSent(connection) {
  if (connection[outstanding] === undefined) {
    connection[outstanding] = 0;
    // Before node-postgres's own listener, which sends the next queued query at once: that query
    // waited for this answer, so it starts a new round trip.
    connection.prependListener('readyForQuery', () => {
      if (connection[outstanding] > 0) connection[outstanding]--;
    });
  }
  counts.requests++;
  if (connection[outstanding] === 0) counts.roundTrips++;
  connection[outstanding]++;
}

const { sync, query } = Connection.prototype;
Connection.prototype.sync = function countedSync(...args) {
  requestSent(this);
  return sync.apply(this, args);
};
Connection.prototype.query = function countedQuery(...args) {
  requestSent(this);
  return query.apply(this, args);
};

if (typeof process.send === 'function') {
  process.on('message', (message) => {
    if (message && message.rrsBench === 'pg-count') process.send({ rrsBench: 'pg-count', ...counts });
  });
  // The channel must not keep a service alive once it has shut down.
  process.channel.unref();
}
