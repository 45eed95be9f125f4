// A small Express 4 orders service using `express-idempotency` 1.0.6 exactly the way its README
// says: the middleware registered with `app.post('*', idempotency.idempotency(options))`, the
// route asking `getSharedIdempotencyService().isHit(req)` first and returning when it is a hit,
// and `idempotencyService.reportError(req)` when processing fails. The store is the package's
// default in-memory data adapter (STORE=memory) or `express-idempotency-redis-adapter` 1.0.8
// (STORE=redis), set up as that adapter's README shows (`new RedisAdapter({connectionConfig})`,
// `adapter.connect().catch(...)`, passed as `dataAdapter`).
//
// `express.json()` is mounted before the idempotency middleware: neither README shows where a
// body parser goes, but the default intent validator compares `req.body` of the retry with the
// stored request's body (README: "expecting a match for the url, the method, the query
// parameters and the body"), which only means something once the body is parsed.
//
// Environment: PORT (listens on 127.0.0.1:PORT, prints nothing special), IDEMSIM_DB (SQLite
// file, better-sqlite3 with SQLite's defaults: rollback journal, synchronous FULL),
// IDEMSIM_BUSY_TIMEOUT_MS (PRAGMA busy_timeout, default 5000), STORE (memory | redis),
// REDIS_URL (for STORE=redis, default redis://127.0.0.1:6379).
//
// API: GET /health -> 200 {"ok":true}. POST /orders, headers Idempotency-Key (the middleware),
// Authorization: Bearer <customer> (401 JSON without), X-Intent (stored in orders.intent, no
// effect on behaviour), body {"sku": string, "quantity": integer} (400 JSON otherwise) ->
// one synchronous INSERT, then 201 {"order": {"id", "sku", "quantity"}} via res.status().json().
//
// idemsim's hook (docs/targets.md "Points (the hook)"; IDEMSIM_HOOK, IDEMSIM_POINTS,
// IDEMSIM_PROCESS, IDEMSIM_PROVIDER): inside the route, after the package has checked and
// claimed the key: `step insert-row` before the INSERT; `before-commit`, `before-effect`
// (+ the provider when the hook answers effect: true) and `after-effect` after it (the INSERT
// autocommits); `after-commit` and `step reply` just before res.json of a fresh request.
// Only armed points call the hook. The route is an async function only so that it can await
// the hook: with IDEMSIM_POINTS empty it never awaits, so it runs from isHit to res.json (and
// the package's send hook) in the same synchronous call as a plain route, and its try/catch
// hands a throw to next(err) synchronously, exactly as Express 4's Layer does for a synchronous
// route. Express 4 ignores the promise an async route returns (a rejection would never reach
// the error handler), hence the explicit try/catch -> next(err), the usual Express 4 idiom.
// `fail` is such a throw: it goes to Express's default error handler (500 HTML), which answers
// with res.end, so the package's send hook never fires and the key stays "in progress".
// `drop`: the route carries on; at its answer the socket is destroyed first, then res.json runs
// as usual (the package stores the response; the client never gets it). `stall`: Atomics.wait
// blocks the whole process.

import http from 'node:http';
import express from 'express';
import Database from 'better-sqlite3';
import idempotency from 'express-idempotency';
import RedisAdapterModule from 'express-idempotency-redis-adapter';

const log = (...a) => console.error('server.mjs:', ...a);

const PORT = Number(process.env.PORT ?? '0');
const DB_PATH = process.env.IDEMSIM_DB;
if (!DB_PATH) {
  log('IDEMSIM_DB is not set');
  process.exit(2);
}
const BUSY_RAW = Number(process.env.IDEMSIM_BUSY_TIMEOUT_MS ?? '5000');
const BUSY_MS = Number.isFinite(BUSY_RAW) ? Math.max(0, Math.floor(BUSY_RAW)) : 5000;
const STORE = process.env.STORE ?? 'memory';
const REDIS_URL = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';
const PROCESS = Number(process.env.IDEMSIM_PROCESS ?? '1') || 1;
const HOOK = process.env.IDEMSIM_HOOK ?? '';
const PROVIDER = process.env.IDEMSIM_PROVIDER ?? '';
const ARMED = new Set((process.env.IDEMSIM_POINTS ?? '').split(',').map((s) => s.trim()).filter(Boolean));
const STEPS = ARMED.has('steps');

// --- SQLite: one connection, SQLite's defaults, busy_timeout from the environment -------------
const db = new Database(DB_PATH, { timeout: BUSY_MS });
db.pragma(`busy_timeout = ${BUSY_MS}`);
db.exec(`CREATE TABLE IF NOT EXISTS orders (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  customer TEXT,
  sku TEXT,
  quantity INTEGER,
  intent TEXT
)`);
const insertOrder = db.prepare(
  'INSERT INTO orders (customer, sku, quantity, intent) VALUES (?, ?, ?, ?)',
);

// --- idemsim's hook and provider (only at armed points) ---------------------------------------
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

/** What the hook's `fail` throws: an ordinary Error, as any unexpected failure would be. */
class HookFail extends Error {}

/** The hook's view of a request: key, intent and attempt from its headers. */
function hookCtx(req) {
  return {
    req,
    key: req.get('idempotency-key') || null,
    intent: req.get('x-intent') ?? null,
    attempt: req.get('x-attempt') ?? null,
    dropReply: false,
  };
}

async function effect(ctx) {
  if (!PROVIDER) throw new Error('effect: IDEMSIM_PROVIDER is not set');
  await postJson(PROVIDER, '/effect', { intent: ctx.intent, key: ctx.key }, 10000);
}

/** Call the hook at `point` (already known to be armed) and do what it answers. */
async function hook(ctx, point, step = null) {
  if (!HOOK) return;
  // No timeout: idemsim may kill this process instead of answering (a crash at this point).
  const a = await postJson(HOOK, '/point', {
    point, process: PROCESS, key: ctx.key, intent: ctx.intent, attempt: ctx.attempt, step,
  }, 0);
  if (a.effect === true) await effect(ctx);
  switch (a.then) {
    case 'fail':
      throw new HookFail(`${point}: fail (hook)`);
    case 'drop':
      ctx.dropReply = true; // the request carries on; its answer never reaches the client
      return;
    case 'stall':
      stall(Number(a.stall_ms) || 0);
      return;
    default:
      return;
  }
}

// --- The idempotency middleware's options --------------------------------------------------------
const options = {};
if (STORE === 'redis') {
  // CommonJS `exports.default`: `require(...).default` in the adapter's README.
  const RedisAdapter = RedisAdapterModule.default ?? RedisAdapterModule;
  const adapter = new RedisAdapter({ connectionConfig: { url: REDIS_URL } });
  adapter.connect().catch((error) => {
    throw error;
  });
  options.dataAdapter = adapter;
} else if (STORE !== 'memory') {
  log(`unknown STORE=${STORE} (memory | redis)`);
  process.exit(2);
}

const app = express();

app.get('/health', (req, res) => {
  res.status(200).json({ ok: true });
});

app.use(express.json());
app.post('*', idempotency.idempotency(options));

app.post('/orders', async (req, res, next) => {
  // async only to await idemsim's hook at armed points (header comment); unarmed it never awaits.
  const ctx = ARMED.size > 0 ? hookCtx(req) : null;
  try {
    // Check if there was a hit! (README: the middleware calls next() even when it answered.)
    const idempotencyService = idempotency.getSharedIdempotencyService();
    if (idempotencyService.isHit(req)) {
      return;
    }

    const auth = req.get('authorization') ?? '';
    const m = /^Bearer\s+(\S+)\s*$/i.exec(auth);
    if (!m) {
      return res.status(401).json({ error: 'missing or malformed Authorization: Bearer <customer>' });
    }
    const customer = m[1];

    const body = req.body;
    const sku = body?.sku;
    const quantity = body?.quantity;
    if (
      body === null || typeof body !== 'object' || Array.isArray(body) ||
      typeof sku !== 'string' || sku.length === 0 ||
      !Number.isInteger(quantity)
    ) {
      return res.status(400).json({ error: 'body must be {"sku": string, "quantity": integer}' });
    }

    const intent = req.get('x-intent') ?? null;
    if (STEPS) await hook(ctx, 'step', 'insert-row');
    let id;
    try {
      id = Number(insertOrder.run(customer, sku, quantity, intent).lastInsertRowid);
    } catch (err) {
      // README: "the middleware must be aware of the error ... notify the middleware by using the
      // reportError function".
      idempotencyService.reportError(req).catch((e) => log('reportError failed:', e?.message ?? e));
      const busy = typeof err?.code === 'string' && err.code.startsWith('SQLITE_BUSY');
      if (!busy) log('insert failed:', err?.stack ?? err);
      return res.status(busy ? 503 : 500).json({ error: busy ? 'database busy' : 'internal error' });
    }
    // The INSERT autocommits: the points after the business write.
    if (ARMED.has('before-commit')) await hook(ctx, 'before-commit');
    if (ARMED.has('before-effect')) await hook(ctx, 'before-effect');
    if (ARMED.has('after-effect')) await hook(ctx, 'after-effect');
    if (ARMED.has('after-commit')) await hook(ctx, 'after-commit');
    if (STEPS) await hook(ctx, 'step', 'reply'); // a crash after the last step, before the answer
    if (ctx?.dropReply) req.socket?.destroy(); // `drop`: the answer below never reaches the client
    res.status(201).json({ order: { id, sku, quantity } });
  } catch (err) {
    // Express 4's way for an error thrown in a route (what its Layer does for a synchronous
    // throw): on to the error handlers, here Express's default one (500).
    if (ctx?.dropReply) req.socket?.destroy();
    next(err);
  }
});

// Malformed JSON is rejected by express.json(), before the idempotency middleware (the key is
// never stored): answer 400 JSON. Every other error (the middleware's 409 "in progress" and 417
// "misuse") goes on to Express's default handler, as in the README (which shows no handler).
app.use((err, req, res, next) => {
  if (err?.type === 'entity.parse.failed') {
    return res.status(400).json({ error: 'body must be {"sku": string, "quantity": integer}' });
  }
  return next(err);
});

const server = app.listen(PORT, '127.0.0.1', () => {
  log(`listening on 127.0.0.1:${server.address().port} store=${STORE} db=${DB_PATH}`);
});

function shutdown() {
  server.close();
  try { db.close(); } catch { /* already closed */ }
  if (options.dataAdapter) options.dataAdapter.disconnect().catch(() => {});
  setTimeout(() => process.exit(0), 200).unref();
}
process.on('SIGTERM', shutdown);
process.on('SIGINT', shutdown);
