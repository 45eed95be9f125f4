// Calibration: what one event-loop turn and a loopback HTTP round trip cost on this machine.
// Run: node tools/calibrate/node-loop.mjs   (Node.js >= 18, no packages)
// Prints medians and 90th percentiles in microseconds.
import http from 'node:http';
import { performance } from 'node:perf_hooks';

const pct = (xs, p) => { const s = [...xs].sort((a, b) => a - b); return s[Math.floor(p * (s.length - 1))]; };
const show = (name, xs) => console.log(`${name.padEnd(46)} p50 ${pct(xs, 0.5).toFixed(1).padStart(7)} us   p90 ${pct(xs, 0.9).toFixed(1).padStart(7)} us   (n=${xs.length})`);

// 1. One event-loop turn: `await new Promise(setImmediate)` on an idle loop.
const turns = [];
for (let i = 0; i < 20000; i++) {
  const t0 = performance.now();
  await new Promise(setImmediate);
  turns.push((performance.now() - t0) * 1000);
}
show('await setImmediate (idle loop)', turns.slice(1000));

// 2. The same turn while 20 other request handlers are queued (all ready at once).
const crowded = [];
for (let r = 0; r < 500; r++) {
  const starts = [];
  await Promise.all(Array.from({ length: 20 }, async () => {
    const t0 = performance.now();
    await new Promise(setImmediate);
    starts.push((performance.now() - t0) * 1000);
  }));
  crowded.push(...starts);
}
show('await setImmediate (20 handlers ready)', crowded);

// 2b. An asynchronous driver's statement: one round trip through libuv's thread pool (what
// the `sqlite3` npm driver does per statement), measured with an fs call on a cached file.
import fs from 'node:fs';
const hops = [];
for (let i = 0; i < 20000; i++) {
  const t0 = performance.now();
  await new Promise((r) => fs.access('.', r));
  hops.push((performance.now() - t0) * 1000);
}
show('thread-pool round trip (fs.access)', hops.slice(1000));

// 3. Loopback HTTP: a keep-alive POST with a small JSON body to a local server, round trip.
const server = http.createServer((req, res) => {
  let body = '';
  req.on('data', (c) => { body += c; });
  req.on('end', () => { res.writeHead(201, { 'content-type': 'application/json' }); res.end(body); });
});
await new Promise((r) => server.listen(0, '127.0.0.1', r));
const port = server.address().port;
const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
const post = () => new Promise((resolve, reject) => {
  const req = http.request({ host: '127.0.0.1', port, method: 'POST', path: '/api/orders', agent,
    headers: { 'content-type': 'application/json', 'idempotency-key': 'k1' } }, (res) => { res.resume(); res.on('end', resolve); });
  req.on('error', reject);
  req.end('{"item":"test-item","qty":2}');
});
const rtts = [];
for (let i = 0; i < 5000; i++) {
  const t0 = performance.now();
  await post();
  rtts.push((performance.now() - t0) * 1000);
}
show('loopback HTTP POST round trip (keep-alive)', rtts.slice(500));

// 4. Twenty requests sent at once (new connections): spread of their arrival at the server.
const arrivals = [];
const burstServer = http.createServer((req, res) => { arrivals.push(performance.now()); req.resume(); req.on('end', () => res.end('{}')); });
await new Promise((r) => burstServer.listen(0, '127.0.0.1', r));
const bport = burstServer.address().port;
const spreads = [];
for (let b = 0; b < 200; b++) {
  arrivals.length = 0;
  await Promise.all(Array.from({ length: 20 }, () => new Promise((resolve) => {
    const req = http.request({ host: '127.0.0.1', port: bport, method: 'POST', path: '/', agent: false }, (res) => { res.resume(); res.on('end', resolve); });
    req.end('{}');
  })));
  spreads.push((Math.max(...arrivals) - Math.min(...arrivals)) * 1000);
}
show('20 concurrent POSTs: first-to-last arrival', spreads);
server.close(); burstServer.close(); agent.destroy();
