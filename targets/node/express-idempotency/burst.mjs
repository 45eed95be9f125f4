// Double-click / burst client for server.mjs.
//
//   node burst.mjs PORT COPIES ROUNDS [DB]        (DB defaults to $IDEMSIM_DB)
//
// Each round uses a fresh Idempotency-Key and sends COPIES identical POST /orders requests on
// COPIES fresh TCP connections: all connections are opened first, then every request is written
// in one synchronous loop (one tick). The key is also sent as X-Intent, which the server stores
// in orders.intent, so rows per key are counted afterwards from the SQLite file (read-only).
// A few warm-up requests (own keys, not counted) go first. Prints rows-per-key counts, the
// rounds with >= 2 rows, and the HTTP status counts (with the content type of non-201 answers).

import net from 'node:net';
import { createRequire } from 'node:module';

const require = createRequire(import.meta.url);
const Database = require('better-sqlite3');

const [portArg, copiesArg, roundsArg, dbArg] = process.argv.slice(2);
const PORT = Number(portArg);
const COPIES = Number(copiesArg ?? '2');
const ROUNDS = Number(roundsArg ?? '50');
const DB = dbArg ?? process.env.IDEMSIM_DB;
if (!PORT || !COPIES || !ROUNDS || !DB) {
  console.error('usage: node burst.mjs PORT COPIES ROUNDS [DB]  (DB defaults to $IDEMSIM_DB)');
  process.exit(2);
}

const RUN = `${Date.now().toString(36)}-${process.pid}`;
const BODY = JSON.stringify({ sku: 'SKU-1', quantity: 1 });

function requestBytes(key) {
  return (
    `POST /orders HTTP/1.1\r\nHost: 127.0.0.1:${PORT}\r\nConnection: close\r\n` +
    `Authorization: Bearer burst-customer\r\nIdempotency-Key: ${key}\r\nX-Intent: ${key}\r\n` +
    `Content-Type: application/json\r\nContent-Length: ${Buffer.byteLength(BODY)}\r\n\r\n${BODY}`
  );
}

function connect() {
  return new Promise((resolve, reject) => {
    const s = net.connect(PORT, '127.0.0.1');
    s.setNoDelay(true);
    s.once('connect', () => resolve(s));
    s.once('error', reject);
  });
}

function collect(s) {
  return new Promise((resolve) => {
    const chunks = [];
    s.on('data', (c) => chunks.push(c));
    s.on('error', () => {});
    s.on('close', () => {
      const text = Buffer.concat(chunks).toString('utf8');
      const status = Number(/^HTTP\/1\.1 (\d{3})/.exec(text)?.[1] ?? 0);
      const ctype = /\r\ncontent-type: ([^\r\n;]+)/i.exec(text)?.[1] ?? '-';
      const body = text.split('\r\n\r\n').slice(1).join('\r\n\r\n');
      resolve({ status, ctype, body });
    });
  });
}

async function round(key, copies) {
  const sockets = await Promise.all(Array.from({ length: copies }, connect));
  const done = sockets.map(collect);
  const bytes = requestBytes(key);
  for (const s of sockets) s.write(bytes); // all copies written in one tick
  return Promise.all(done);
}

// Warm-up: a few single requests so the server's code paths are hot.
for (let i = 0; i < 5; i++) await round(`warm-${RUN}-${i}`, 1);

const statuses = new Map();
let idsAnswered = 0; // distinct order ids named by the 201 answers, summed over rounds
const samples = new Map();
const keys = [];
for (let r = 0; r < ROUNDS; r++) {
  const key = `burst-${RUN}-${r}`;
  keys.push(key);
  const ids = new Set();
  for (const res of await round(key, COPIES)) {
    if (res.status === 201) { try { ids.add(JSON.parse(res.body).order.id); } catch { ids.add('?'); } }
    const label = res.status === 201 ? '201' : `${res.status} ${res.ctype}`;
    statuses.set(label, (statuses.get(label) ?? 0) + 1);
    if (!samples.has(label)) samples.set(label, res.body.slice(0, 160).replace(/\s+/g, ' '));
  }
  idsAnswered += ids.size;
  await new Promise((r2) => setTimeout(r2, 20)); // let the round's store updates settle
}

const db = new Database(DB, { readonly: true, fileMustExist: true });
const count = db.prepare('SELECT COUNT(*) AS n FROM orders WHERE intent = ?');
const perKey = new Map();
let dupRounds = 0;
for (const key of keys) {
  const n = count.get(key).n;
  perKey.set(n, (perKey.get(n) ?? 0) + 1);
  if (n >= 2) dupRounds++;
}
db.close();

const cmp = (a, b) => (typeof a === 'number' && typeof b === 'number' ? a - b : String(a).localeCompare(String(b)));
const fmt = (m) => [...m.entries()].sort((a, b) => cmp(a[0], b[0])).map(([k, v]) => `${k}:${v}`).join(' ');
console.log(`port=${PORT} copies=${COPIES} rounds=${ROUNDS}`);
console.log(`rows per key (rows:keys): ${fmt(perKey)}`);
console.log(`rounds with >=2 rows: ${dupRounds}/${ROUNDS}`);
console.log(`statuses (status:count): ${fmt(statuses)}`);
console.log(`distinct order ids in 201 answers, summed over rounds: ${idsAnswered} (${ROUNDS} if every round answered one order)`);
for (const [label, body] of samples) if (label !== '201') console.log(`  sample ${label}: ${body}`);
