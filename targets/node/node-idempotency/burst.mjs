// Double-click / burst client for server.mjs.
//
//   node burst.mjs PORT COPIES ROUNDS [DB]      (DB defaults to $IDEMSIM_DB)
//
// Warms the server with 5 sequential POSTs (customer "warmup"), then per round: opens COPIES
// fresh TCP connections, waits until all are connected, writes the same POST /orders (same
// fresh Idempotency-Key, same body, X-Intent = the key) on every one in one tick, and waits for
// every answer. At the end it opens the SQLite file read-only and prints how many rounds had
// 0, 1, 2, ... rows for their key (rows attributed by intent), and the status counts
// ("201", "201 replayed", "409", ...).
import net from 'node:net';
import http from 'node:http';
import Database from 'better-sqlite3';

const [portArg, copiesArg, roundsArg, dbArg] = process.argv.slice(2);
const PORT = Number(portArg);
const COPIES = Number(copiesArg ?? '2');
const ROUNDS = Number(roundsArg ?? '50');
const DB = dbArg ?? process.env.IDEMSIM_DB;
if (!PORT || !COPIES || !ROUNDS || !DB) {
  console.error('usage: node burst.mjs PORT COPIES ROUNDS [DB]   (or IDEMSIM_DB=...)');
  process.exit(2);
}
const RUN = `${process.pid}-${Date.now().toString(36)}`;

function rawRequest(key, customer, bodyObj) {
  const body = JSON.stringify(bodyObj);
  return `POST /orders HTTP/1.1\r\nHost: 127.0.0.1:${PORT}\r\nConnection: close\r\n`
    + `Authorization: Bearer ${customer}\r\nIdempotency-Key: ${key}\r\nX-Intent: ${key}\r\n`
    + `Content-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`;
}

function connect() {
  return new Promise((resolve, reject) => {
    const s = net.connect({ host: '127.0.0.1', port: PORT, noDelay: true });
    s.once('connect', () => resolve(s));
    s.once('error', reject);
  });
}

/** Reads the whole answer (Connection: close) and returns {status, replayed, body}. */
function readAnswer(sock) {
  return new Promise((resolve) => {
    const chunks = [];
    sock.on('data', (c) => chunks.push(c));
    sock.on('error', () => {});
    sock.on('close', () => {
      const text = Buffer.concat(chunks).toString('utf8');
      const m = /^HTTP\/1\.1 (\d{3})/.exec(text);
      const head = text.split('\r\n\r\n')[0] ?? '';
      resolve({
        status: m ? Number(m[1]) : 0,
        replayed: /^idempotent-replayed:\s*true\s*$/im.test(head),
        body: text.slice(head.length + 4),
      });
    });
  });
}

function post(key) {
  return new Promise((resolve, reject) => {
    const body = JSON.stringify({ sku: 'warm-sku', quantity: 1 });
    const req = http.request({
      host: '127.0.0.1', port: PORT, method: 'POST', path: '/orders', agent: false,
      headers: { Authorization: 'Bearer warmup', 'Idempotency-Key': key, 'X-Intent': key,
        'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(body) },
    }, (res) => { res.resume(); res.on('end', () => resolve(res.statusCode)); });
    req.on('error', reject);
    req.end(body);
  });
}

for (let i = 0; i < 5; i++) await post(`warm-${RUN}-${i}`);

const statusCounts = new Map();
const keys = [];
for (let r = 0; r < ROUNDS; r++) {
  const key = `burst-${RUN}-${r}`;
  keys.push(key);
  const payload = rawRequest(key, 'alice', { sku: 'sku-1', quantity: 1 });
  const socks = await Promise.all(Array.from({ length: COPIES }, connect));
  const answers = socks.map(readAnswer);
  for (const s of socks) s.write(payload); // one tick
  for (const a of await Promise.all(answers)) {
    const label = `${a.status}${a.replayed ? ' replayed' : ''}`;
    statusCounts.set(label, (statusCounts.get(label) ?? 0) + 1);
  }
  await new Promise((res) => setTimeout(res, 5));
}

const db = new Database(DB, { readonly: true, fileMustExist: true });
db.pragma('busy_timeout = 5000');
const count = db.prepare('SELECT COUNT(*) AS n FROM orders WHERE intent = ?');
const perKey = new Map();
for (const key of keys) {
  const n = count.get(key).n;
  perKey.set(n, (perKey.get(n) ?? 0) + 1);
}
db.close();
const dup = [...perKey].filter(([n]) => n >= 2).reduce((a, [, c]) => a + c, 0);
console.log(`port=${PORT} copies=${COPIES} rounds=${ROUNDS}`);
console.log(`rows per key: ${[...perKey].sort((a, b) => a[0] - b[0]).map(([n, c]) => `${n} rows: ${c} rounds`).join(', ')}`);
console.log(`rounds with >=2 rows: ${dup}/${ROUNDS}`);
console.log(`statuses: ${[...statusCounts].sort().map(([s, c]) => `${s}: ${c}`).join(', ')}`);
