// The reference article's service as a real idemsim target (docs/targets.md is the contract,
// docs/article-cases.md the service): Node.js `http.createServer` + a synchronous SQLite
// driver (one connection per process) on the file IDEMSIM_DB with SQLite's defaults (rollback
// journal, synchronous = FULL) and `PRAGMA busy_timeout`.
//
// VARIANT = no-key | check-first | transactional | outbox (the model of the same name).
// SQLITE_DRIVER = better-sqlite3 (default) | node:sqlite (the article's `DatabaseSync`, Node
// >= 22.5; the node24-* targets run it on Node 24). The driver is imported dynamically, so a
// process loads only the one it uses (better-sqlite3's native addon is built for the Node that
// installed it and is never loaded under node:sqlite).
//
// Faithfulness notes:
// - Both drivers are synchronous, so every statement (and each autocommit's fsync) blocks the
//   event loop. With better-sqlite3 12 (Node 20) it stands for node:sqlite's DatabaseSync; with
//   node:sqlite it is the article's own driver. The request path is the same code for both:
//   the same prepared statements called with .run()/.get()/.all(); only opening the database,
//   the in-transaction test and the error shape differ (openDatabase, isBusy, isConstraint).
// - The only `await` on a request's path when IDEMSIM_POINTS is empty is check-first's
//   `await new Promise(setImmediate)` (the article's). The body is read with 'data'/'end'
//   listeners (stream callbacks, no promise). Hook calls happen only at armed points; each is an
//   HTTP round trip, hence an await the real server would not have (docs/targets.md).
// - X-Tenant is ignored (the article's service has no tenants). `qty` is checked with
//   Number.isInteger after JSON.parse, so `2.0` counts as 2 (serde would refuse it).
// - outbox (models/outbox.toml), approximations: the outbox table is
//   outbox(id, intent, key, created_us, sent); `created_us` is this process's wall clock; the
//   relay is a setInterval of [outbox] relay_every_ms = 50 ms in every process (no claiming,
//   as the model: two processes may deliver the same message), each pass reads up to 16 unsent
//   messages in id order, POSTs each to {IDEMSIM_PROVIDER}/effect with {"intent","key"} (2 s
//   timeout), runs the `relay-after-send` point when armed, then marks it sent; a failed
//   delivery ends the pass. A pass never overlaps the previous one. The model's [world]
//   max_steps budget for relay passes has no equivalent (the relay runs until SIGKILL).
//
// Instrumentation (IDEMSIM_TRACE): per request the events read, lookup, resume, insert, commit,
// save, reply are kept in the request's own array and appended to the file with one
// synchronous fs.appendFileSync when the request replies (or drops its connection), so a
// SIGKILL loses only unanswered requests. Extra fields beyond the contract: on `read`,
// `accepted_us` (when the JS side of the server's accept of the TCP connection began) and `pass` (an event-loop pass
// counter: reads with the same `pass` were read in the same poll phase, before any
// setImmediate callback ran; counted by one setImmediate scheduled by the first read of a
// pass, only when tracing); on `reply`, `status` (0 = dropped).
import http from 'node:http';
import crypto from 'node:crypto';
import fs from 'node:fs';
import { performance } from 'node:perf_hooks';

const VARIANT = process.env.VARIANT ?? '';
const VARIANTS = ['no-key', 'check-first', 'transactional', 'outbox'];
if (!VARIANTS.includes(VARIANT)) {
  console.error(`server.mjs: VARIANT must be one of ${VARIANTS.join(', ')}, not "${VARIANT}"`);
  process.exit(2);
}
const DRIVER = process.env.SQLITE_DRIVER || 'better-sqlite3';
const DRIVERS = ['better-sqlite3', 'node:sqlite'];
if (!DRIVERS.includes(DRIVER)) {
  console.error(`server.mjs: SQLITE_DRIVER must be one of ${DRIVERS.join(', ')}, not "${DRIVER}"`);
  process.exit(2);
}
const DB_PATH = process.env.IDEMSIM_DB;
if (!DB_PATH) {
  console.error('server.mjs: IDEMSIM_DB is not set');
  process.exit(2);
}
const PROCESS = Number(process.env.IDEMSIM_PROCESS ?? '1') || 1;
const BUSY_MS = Number(process.env.IDEMSIM_BUSY_TIMEOUT_MS ?? '5000');
const HOOK = process.env.IDEMSIM_HOOK ?? '';
const PROVIDER = process.env.IDEMSIM_PROVIDER ?? '';
const TRACE = process.env.IDEMSIM_TRACE ?? '';
const ARMED = new Set((process.env.IDEMSIM_POINTS ?? '').split(',').map((s) => s.trim()).filter(Boolean));
const STEPS = ARMED.has('steps');
const RELAY_EVERY_MS = 50;
const CATALOGUE = ['test-item', 'sample-item', 'other-item'];
const ROUTES = { '/api/orders': 'order.create', '/api/returns': 'return.create' };
const KEY_MAX_LEN = 255;

// ---- database ---------------------------------------------------------------------------
/**
 * Open IDEMSIM_DB with the chosen driver. better-sqlite3: its own Database object. node:sqlite:
 * a DatabaseSync behind the few members this file uses besides its statements (exec, prepare,
 * inTransaction, close); the prepared statements are DatabaseSync's own, called directly.
 */
async function openDatabase() {
  const busyMs = Number.isFinite(BUSY_MS) ? Math.max(0, Math.floor(BUSY_MS)) : 5000;
  if (DRIVER === 'node:sqlite') {
    const { DatabaseSync } = await import('node:sqlite');
    const raw = new DatabaseSync(DB_PATH, { timeout: busyMs });
    raw.exec(`PRAGMA busy_timeout = ${busyMs}`);
    return {
      exec: (text) => raw.exec(text),
      prepare: (text) => raw.prepare(text),
      get inTransaction() {
        return raw.isTransaction;
      },
      close: () => raw.close(),
    };
  }
  const { default: Database } = await import('better-sqlite3');
  const db = new Database(DB_PATH, { timeout: Number.isFinite(BUSY_MS) ? BUSY_MS : 5000 });
  db.pragma(`busy_timeout = ${busyMs}`);
  return db;
}
const db = await openDatabase();
db.exec(`
CREATE TABLE IF NOT EXISTS rows(id INTEGER PRIMARY KEY, user TEXT, operation TEXT, item TEXT,
  qty INTEGER, intent TEXT);
CREATE TABLE IF NOT EXISTS keys(user TEXT, operation TEXT, key TEXT, fingerprint TEXT,
  status INTEGER, response TEXT, PRIMARY KEY (user, operation, key));
`);
if (VARIANT === 'outbox') {
  db.exec(`CREATE TABLE IF NOT EXISTS outbox(id INTEGER PRIMARY KEY, intent TEXT, key TEXT,
    created_us INTEGER, sent INTEGER NOT NULL DEFAULT 0);`);
}
const sql = {
  begin: db.prepare('BEGIN IMMEDIATE'),
  commit: db.prepare('COMMIT'),
  rollback: db.prepare('ROLLBACK'),
  lookup: db.prepare('SELECT fingerprint, status, response FROM keys WHERE user = ? AND operation = ? AND key = ?'),
  insertRow: db.prepare('INSERT INTO rows(user, operation, item, qty, intent) VALUES (?, ?, ?, ?, ?)'),
  saveKey: db.prepare('INSERT INTO keys(user, operation, key, fingerprint, status, response) VALUES (?, ?, ?, ?, ?, ?)'),
};
if (VARIANT === 'outbox') {
  sql.outbox = db.prepare('INSERT INTO outbox(intent, key, created_us) VALUES (?, ?, ?)');
  sql.unsent = db.prepare('SELECT id, intent, key FROM outbox WHERE sent = 0 ORDER BY id LIMIT 16');
  sql.markSent = db.prepare('UPDATE outbox SET sent = 1 WHERE id = ?');
}

// ---- instrumentation ------------------------------------------------------------------------
const nowUs = () => Math.round(performance.timeOrigin * 1000 + performance.now() * 1000);
let pass = 0;
let passMarked = false;
function ev(ctx, name, extra) {
  if (!TRACE) return;
  const line = { t_us: nowUs(), process: PROCESS, attempt: ctx.attempt, ev: name };
  if (extra) Object.assign(line, extra);
  ctx.events.push(JSON.stringify(line));
}
function flushTrace(ctx) {
  if (!TRACE || ctx.events.length === 0) return;
  try {
    fs.appendFileSync(TRACE, ctx.events.join('\n') + '\n');
  } catch (e) {
    console.error(`server.mjs: trace write failed: ${e.message}`);
  }
  ctx.events = [];
}

// ---- hook and provider ----------------------------------------------------------------------
function postJson(base, path, body, timeoutMs) {
  return new Promise((resolve, reject) => {
    const data = Buffer.from(JSON.stringify(body));
    const req = http.request(
      new URL(path, base),
      {
        method: 'POST',
        agent: false,
        headers: { 'content-type': 'application/json', 'content-length': data.length, connection: 'close' },
      },
      (res) => {
        const chunks = [];
        res.on('data', (c) => chunks.push(c));
        res.on('end', () => {
          const text = Buffer.concat(chunks).toString('utf8');
          if (res.statusCode < 200 || res.statusCode > 299) return reject(new Error(`${path}: status ${res.statusCode}`));
          try {
            resolve(text ? JSON.parse(text) : {});
          } catch {
            reject(new Error(`${path}: answer is not JSON`));
          }
        });
        res.on('error', reject);
      },
    );
    req.on('error', reject);
    if (timeoutMs) req.setTimeout(timeoutMs, () => req.destroy(new Error(`${path}: no answer in ${timeoutMs} ms`)));
    req.end(data);
  });
}

const stallCell = new Int32Array(new SharedArrayBuffer(4));
/** Block the whole process (a GC pause, a blocking call): nothing else runs meanwhile. */
function stall(ms) {
  if (ms > 0) Atomics.wait(stallCell, 0, 0, ms);
}

class HookFail extends Error {}

async function effect(ctx) {
  if (!PROVIDER) throw new Error('effect: IDEMSIM_PROVIDER is not set');
  await postJson(PROVIDER, '/effect', { intent: ctx.intent, key: ctx.key }, 10000);
}

/** Call the hook at `point` (already known to be armed) and do what it answers. */
async function hook(ctx, point, step = null) {
  if (!HOOK) return;
  // No timeout: idemsim may kill this process instead of answering (a crash at this point).
  const a = await postJson(HOOK, '/point', { point, process: PROCESS, key: ctx.key, intent: ctx.intent, attempt: ctx.attempt, step }, 0);
  if (a.effect === true) await effect(ctx);
  switch (a.then) {
    case 'fail':
      throw new HookFail(`${point}: fail (hook)`);
    case 'drop':
      ctx.dropReply = true; // the request carries on; its reply is never sent
      return;
    case 'stall':
      stall(Number(a.stall_ms) || 0);
      return;
    default:
      return;
  }
}

// ---- replies ----------------------------------------------------------------------------------
function reply(ctx, status, bodyText, replayed = false) {
  if (ctx.replied) return;
  ctx.replied = true;
  const { res } = ctx;
  if (ctx.dropReply) {
    ev(ctx, 'reply', { status: 0 });
    flushTrace(ctx);
    res.socket?.destroy();
    return;
  }
  const headers = { 'content-type': 'application/json', 'content-length': Buffer.byteLength(bodyText) };
  if (replayed) headers['idempotent-replayed'] = 'true';
  // The trace is written before the answer leaves: idemsim may kill the process as soon as
  // the last answer arrives, and a line written after it would be lost.
  ev(ctx, 'reply', { status });
  flushTrace(ctx);
  res.writeHead(status, headers);
  res.end(bodyText);
}
const error = (ctx, status, msg) => reply(ctx, status, JSON.stringify({ error: msg }));

// better-sqlite3 names the result code in `code` ('SQLITE_BUSY', 'SQLITE_BUSY_SNAPSHOT', …);
// node:sqlite throws code 'ERR_SQLITE_ERROR' with the (extended) result code in `errcode`
// (5 SQLITE_BUSY, 'database is locked'; 2067 SQLITE_CONSTRAINT_UNIQUE): its low byte is the
// primary code.
const sqliteCode = (e) => (e?.code === 'ERR_SQLITE_ERROR' && typeof e.errcode === 'number' ? e.errcode & 0xff : -1);
function isBusy(e) {
  if (sqliteCode(e) === 5) return true;
  return typeof e?.code === 'string' && (e.code === 'SQLITE_BUSY' || e.code.startsWith('SQLITE_BUSY_'));
}
const isConstraint = (e) => sqliteCode(e) === 19 || String(e?.code).startsWith('SQLITE_CONSTRAINT');

/** The error path: ROLLBACK this request's own open transaction, then 503 (busy) or 500. */
function fail(ctx, e) {
  if (ctx.inTx && db.inTransaction) {
    try {
      sql.rollback.run();
    } catch {
      /* already ended */
    }
  }
  ctx.inTx = false;
  if (!(e instanceof HookFail) && !isBusy(e) && !isConstraint(e)) console.error(`server.mjs[${PROCESS}] ${VARIANT}: ${e?.stack ?? e}`);
  if (isBusy(e)) error(ctx, 503, 'database busy, safe to retry');
  else error(ctx, 500, 'internal error');
}

/** A stored record found: 422 on another fingerprint, else the stored reply. */
function hit(ctx, rec) {
  if (rec.fingerprint !== ctx.fingerprint) return error(ctx, 422, 'Idempotency-Key reused with a different payload');
  return reply(ctx, rec.status, rec.response, true);
}

// ---- the front half: route, user, body, key -------------------------------------------------
function admit(ctx, body) {
  let value;
  try {
    value = JSON.parse(body.toString('utf8'));
  } catch {
    return error(ctx, 400, 'invalid JSON');
  }
  const ok =
    value !== null &&
    typeof value === 'object' &&
    !Array.isArray(value) &&
    Object.keys(value).length === 2 &&
    typeof value.item === 'string' &&
    CATALOGUE.includes(value.item) &&
    Number.isInteger(value.qty) &&
    value.qty >= 1 &&
    value.qty <= 10;
  if (!ok) return error(ctx, 400, 'invalid order');
  ctx.item = value.item;
  ctx.qty = value.qty;
  if (VARIANT !== 'no-key') {
    const key = ctx.req.headers['idempotency-key'];
    if (key === undefined || key === '') return error(ctx, 400, 'missing Idempotency-Key');
    if ([...key].length > KEY_MAX_LEN) return error(ctx, 400, 'Idempotency-Key too long');
    ctx.key = key;
    ctx.fingerprint = crypto.createHash('sha256').update(JSON.stringify({ item: ctx.item, qty: ctx.qty })).digest('hex');
  }
  return true;
}

// ---- the variants ---------------------------------------------------------------------------
// Each `if (X) await hook(...)` runs only at an armed point: with IDEMSIM_POINTS empty these
// functions never await (check-first's setImmediate apart), and stay synchronous end to end.
const created = (ctx, id) => JSON.stringify({ id, item: ctx.item, qty: ctx.qty });

async function noKey(ctx) {
  if (STEPS) await hook(ctx, 'step', 'begin');
  sql.begin.run();
  ctx.inTx = true;
  if (STEPS) await hook(ctx, 'step', 'insert-row');
  const id = Number(sql.insertRow.run(ctx.user, ctx.operation, ctx.item, ctx.qty, ctx.intent).lastInsertRowid);
  ev(ctx, 'insert');
  if (ARMED.has('before-commit')) await hook(ctx, 'before-commit');
  if (STEPS) await hook(ctx, 'step', 'commit');
  sql.commit.run();
  ctx.inTx = false;
  ev(ctx, 'commit');
  if (ARMED.has('before-effect')) await hook(ctx, 'before-effect');
  if (ARMED.has('after-commit')) await hook(ctx, 'after-commit');
  if (STEPS) await hook(ctx, 'step', 'reply'); // a crash after the last step, before the answer
  reply(ctx, 201, created(ctx, id));
}

async function checkFirst(ctx) {
  if (STEPS) await hook(ctx, 'step', 'lookup');
  ev(ctx, 'lookup');
  const rec = sql.lookup.get(ctx.user, ctx.operation, ctx.key);
  if (rec) return hit(ctx, rec);
  if (STEPS) await hook(ctx, 'step', 'await');
  await new Promise(setImmediate); // the article's await (an asynchronous driver's wait)
  ev(ctx, 'resume');
  if (STEPS) await hook(ctx, 'step', 'insert-row');
  const id = Number(sql.insertRow.run(ctx.user, ctx.operation, ctx.item, ctx.qty, ctx.intent).lastInsertRowid);
  ev(ctx, 'insert'); // autocommit: the row is durable here
  if (ARMED.has('before-commit')) await hook(ctx, 'before-commit');
  if (STEPS) await hook(ctx, 'step', 'save-response');
  const body = created(ctx, id);
  sql.saveKey.run(ctx.user, ctx.operation, ctx.key, ctx.fingerprint, 201, body); // PK clash → 500
  ev(ctx, 'save');
  if (ARMED.has('before-effect')) await hook(ctx, 'before-effect');
  if (ARMED.has('after-commit')) await hook(ctx, 'after-commit');
  if (STEPS) await hook(ctx, 'step', 'reply'); // a crash after the last step, before the answer
  reply(ctx, 201, body);
}

async function transactional(ctx, withOutbox) {
  if (STEPS) await hook(ctx, 'step', 'begin');
  sql.begin.run();
  ctx.inTx = true;
  if (STEPS) await hook(ctx, 'step', 'lookup');
  ev(ctx, 'lookup');
  const rec = sql.lookup.get(ctx.user, ctx.operation, ctx.key);
  if (rec) {
    sql.commit.run();
    ctx.inTx = false;
    return hit(ctx, rec);
  }
  if (STEPS) await hook(ctx, 'step', 'insert-row');
  const id = Number(sql.insertRow.run(ctx.user, ctx.operation, ctx.item, ctx.qty, ctx.intent).lastInsertRowid);
  ev(ctx, 'insert');
  if (withOutbox) {
    if (STEPS) await hook(ctx, 'step', 'outbox');
    sql.outbox.run(ctx.intent, ctx.key, nowUs());
  }
  if (ARMED.has('before-commit')) await hook(ctx, 'before-commit');
  if (STEPS) await hook(ctx, 'step', 'save-response');
  const body = created(ctx, id);
  sql.saveKey.run(ctx.user, ctx.operation, ctx.key, ctx.fingerprint, 201, body);
  ev(ctx, 'save');
  if (STEPS) await hook(ctx, 'step', 'commit');
  sql.commit.run();
  ctx.inTx = false;
  ev(ctx, 'commit');
  if (ARMED.has('before-effect')) await hook(ctx, 'before-effect');
  if (ARMED.has('after-commit')) await hook(ctx, 'after-commit');
  if (STEPS) await hook(ctx, 'step', 'reply'); // a crash after the last step, before the answer
  reply(ctx, 201, body);
}

const PROGRAM = {
  'no-key': noKey,
  'check-first': checkFirst,
  transactional: (ctx) => transactional(ctx, false),
  outbox: (ctx) => transactional(ctx, true),
}[VARIANT];

// ---- outbox relay ---------------------------------------------------------------------------
let relaying = false;
async function relayPass() {
  if (relaying) return;
  relaying = true;
  try {
    let msgs;
    try {
      msgs = sql.unsent.all();
    } catch {
      return; // locked or inside another request's transaction: next pass
    }
    for (const m of msgs) {
      const ctx = { attempt: null, events: [], key: m.key, intent: m.intent };
      try {
        await effect(ctx);
      } catch {
        return; // delivery failed: retried next pass
      }
      if (ARMED.has('relay-after-send')) {
        try {
          await hook(ctx, 'relay-after-send');
        } catch {
          return;
        }
      }
      try {
        sql.markSent.run(m.id);
      } catch {
        return;
      }
    }
  } finally {
    relaying = false;
  }
}

// ---- the server -----------------------------------------------------------------------------
const server = http.createServer((req, res) => {
  const ctx = {
    req,
    res,
    attempt: req.headers['x-attempt'] ?? null,
    intent: req.headers['x-intent'] ?? null,
    key: null,
    events: [],
    inTx: false,
    replied: false,
    dropReply: false,
  };
  if (TRACE) {
    if (!passMarked) {
      passMarked = true;
      setImmediate(() => {
        pass++;
        passMarked = false;
      });
    }
    ev(ctx, 'read', { pass, accepted_us: req.socket._idemsimAcceptedUs ?? null });
  }
  const path = (req.url ?? '').split('?')[0];
  const operation = req.method === 'POST' ? ROUTES[path] : undefined;
  if (!operation) {
    req.resume();
    return error(ctx, 404, 'not found');
  }
  const user = req.headers['x-user'];
  if (!user) {
    req.resume();
    return error(ctx, 401, 'unauthenticated');
  }
  ctx.operation = operation;
  ctx.user = user;
  const chunks = [];
  req.on('data', (c) => chunks.push(c));
  req.on('end', () => {
    if (admit(ctx, Buffer.concat(chunks)) !== true) return;
    let p;
    try {
      p = PROGRAM(ctx);
    } catch (e) {
      return fail(ctx, e);
    }
    p.catch((e) => fail(ctx, e));
  });
});
if (TRACE) {
  // `accepted_us` is when the JS side of the accept begins (the listening handle's
  // `onconnection`), stamped on the new handle before Node builds its socket: the cold code of a
  // fresh process's first accept (creating the net.Socket, http's connection listener, about
  // 1–2 ms) then falls between it and the next accept, where the loop is blocked, as a real
  // accept costs it (docs/reality.md). Only the native accept before it (~0.3 ms) is unseen.
  server.on('connection', (sock) => {
    sock._idemsimAcceptedUs = sock._handle?._idemsimAcceptedUs ?? nowUs();
  });
  server.on('listening', () => {
    const handle = server._handle;
    const accept = handle?.onconnection;
    if (typeof accept !== 'function') return;
    handle.onconnection = function (err, client) {
      if (client) client._idemsimAcceptedUs = nowUs();
      return accept.call(this, err, client);
    };
  });
}
server.keepAliveTimeout = 5000;

function shutdown() {
  try {
    server.close();
    db.close();
  } finally {
    process.exit(0);
  }
}
process.on('SIGTERM', shutdown);
process.on('SIGINT', shutdown);

server.listen(0, '127.0.0.1', () => {
  if (VARIANT === 'outbox') setInterval(relayPass, RELAY_EVERY_MS);
  process.stdout.write(`IDEMSIM_LISTENING ${server.address().port}\n`);
});
