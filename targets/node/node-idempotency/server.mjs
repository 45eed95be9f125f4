// An orders service guarded by the npm package @node-idempotency/core 1.0.11, used the way its
// README says: `new Idempotency(storageAdapter, options)`, then per request
//   onRequest(req) -> undefined: run the handler, then onResponse(req, {body, additional})
//                  -> a stored response: replay it
//                  -> throws IdempotencyError: map it to HTTP
// The package's Express middleware (@node-idempotency/express) is not published, so the glue
// below is written by hand and follows the published NestJS interceptor,
// @node-idempotency/nestjs 1.0.4, dist/interceptors/node-idempotency.iterceptor.js
// (and its HTTP map, @node-idempotency/shared 1.0.3, dist/http.js):
//   - idempotencyReq = { headers: request.headers, body: request.body, path: request.url,
//     method: request.method }                                             (interceptor l.38-44)
//   - a replay: status = additional.statusCode, the cached headers (headers2Cache: only
//     Content-Type), plus `Idempotent-Replayed: true`; the stored body, or, when the stored
//     response is an error, that error                                   (l.50-72, http.js l.11-18)
//   - IdempotencyError -> idempotency2HttpCodeMap[err.code] || 500; REQUEST_IN_PROGRESS also
//     sets `Retry-After: 1`                                               (l.74-81, http.js l.5-10):
//       IDEMPOTENCY_FINGERPRINT_MISSMATCH 422, IDEMPOTENCY_KEY_LEN_EXEEDED 400,
//       IDEMPOTENCY_KEY_MISSING 400, REQUEST_IN_PROGRESS 409
//   - success: `await onResponse(req, {additional: {statusCode, Content-Type}, body})`, and the
//     answer leaves only after it (the interceptor's map(async ...), l.108-128)
//   - handler error: `onResponse(req, {additional: {statusCode}, error}).catch(() => {})`, not
//     awaited, then the error answer (catchError, l.129-138): errors are cached and replayed too
//   - anything else thrown on the way: 500                                     (l.86)
// Error bodies for the package's errors copy NestJS's default exception body
// {"statusCode": N, "message": err.message}.
//
// Order of a POST /orders, as in NestJS (guards, then interceptors, then pipes/handler):
//   401 (no `Authorization: Bearer <customer>`) -> express.json() (400 on malformed JSON) ->
//   onRequest -> handler: 400 on an invalid order (cached under the key like any answer), else
//   one synchronous better-sqlite3 INSERT and 201 -> onResponse.
// Options are the package's defaults: enforceIdempotency false (no key: no idempotency at all),
// keyMaxLength 256, cacheTTLMS 24 h, inProgressStrategy.wait false. The cache key is
// `node-idempotency:POST:/orders:<key>`: the customer is not part of it (the package's scope).
//
// Environment: PORT (127.0.0.1:PORT), IDEMSIM_DB (SQLite file), IDEMSIM_BUSY_TIMEOUT_MS (5000),
// STORE = memory | redis, REDIS_URL (redis://127.0.0.1:6379 by default).
//
// idemsim's hook (docs/targets.md "Points (the hook)"; IDEMSIM_HOOK, IDEMSIM_POINTS,
// IDEMSIM_PROCESS, IDEMSIM_PROVIDER), only at armed points, all inside the handler the package
// protects (after onRequest claimed the key, before onResponse stores the outcome):
// `step insert-row` before the INSERT; `before-commit`, `before-effect` (+ the provider when
// the hook answers effect: true) and `after-effect` after it (the INSERT autocommits);
// `after-commit` and `step reply` as the handler's last act, before it returns its answer.
// With no point armed the handler is the synchronous createOrder below, called without an
// await as before; with a point armed it is createOrderHooked (the same statements plus the
// awaited hook calls), awaited. `fail` throws an ordinary Error out of the handler: it takes
// the service's handler-error path (the interceptor's catchError): onResponse caches a 500
// error for the key (not awaited), the client gets 500, and every retry with the key gets that
// 500 replayed (Idempotent-Replayed: true) for the 24 h TTL. `drop`: the handler carries on;
// after onResponse stored the outcome, the socket is destroyed instead of answering.
// `stall`: Atomics.wait blocks the whole process.
import http from 'node:http';
import express from 'express';
import Database from 'better-sqlite3';
import { Idempotency, IdempotencyError, IdempotencyErrorCodes } from '@node-idempotency/core';
import { MemoryStorageAdapter } from '@node-idempotency/storage-adapter-memory';
import { RedisStorageAdapter } from '@node-idempotency/storage-adapter-redis';

const PORT = Number(process.env.PORT ?? '0');
const DB_PATH = process.env.IDEMSIM_DB;
if (!DB_PATH) {
  console.error('server.mjs: IDEMSIM_DB is not set');
  process.exit(2);
}
const BUSY_RAW = Number(process.env.IDEMSIM_BUSY_TIMEOUT_MS ?? '5000');
const BUSY_MS = Number.isFinite(BUSY_RAW) ? Math.max(0, Math.floor(BUSY_RAW)) : 5000;
const PROCESS = Number(process.env.IDEMSIM_PROCESS ?? '1') || 1;
const HOOK = process.env.IDEMSIM_HOOK ?? '';
const PROVIDER = process.env.IDEMSIM_PROVIDER ?? '';
const ARMED = new Set((process.env.IDEMSIM_POINTS ?? '').split(',').map((s) => s.trim()).filter(Boolean));
const STEPS = ARMED.has('steps');
const STORE = process.env.STORE || 'memory';
if (STORE !== 'memory' && STORE !== 'redis') {
  console.error(`server.mjs: STORE must be memory or redis, not "${STORE}"`);
  process.exit(2);
}

// SQLite's defaults: rollback journal (DELETE), synchronous = FULL; one connection.
const db = new Database(DB_PATH, { timeout: BUSY_MS });
db.pragma(`busy_timeout = ${BUSY_MS}`);
db.exec(`CREATE TABLE IF NOT EXISTS orders(
  id INTEGER PRIMARY KEY AUTOINCREMENT, customer TEXT, sku TEXT, quantity INTEGER, intent TEXT)`);
const insertOrder = db.prepare(
  'INSERT INTO orders(customer, sku, quantity, intent) VALUES (?, ?, ?, ?)');

// Storage, as @node-idempotency/shared's buildStorageAdapter does it (dist/storage.js):
// a MemoryStorageAdapter, or a RedisStorageAdapter(options) followed by connect().
let storage;
if (STORE === 'redis') {
  storage = new RedisStorageAdapter({ url: process.env.REDIS_URL || 'redis://127.0.0.1:6379' });
  await storage.connect();
} else {
  storage = new MemoryStorageAdapter();
}
const idempotency = new Idempotency(storage, {});

// NestJS interceptor's map and headers (@node-idempotency/shared dist/http.js).
const idempotency2HttpCodeMap = {
  [IdempotencyErrorCodes.IDEMPOTENCY_FINGERPRINT_MISSMATCH]: 422,
  [IdempotencyErrorCodes.IDEMPOTENCY_KEY_LEN_EXEEDED]: 400,
  [IdempotencyErrorCodes.IDEMPOTENCY_KEY_MISSING]: 400,
  [IdempotencyErrorCodes.REQUEST_IN_PROGRESS]: 409,
};
const headers2Cache = ['Content-Type'];

class HttpError extends Error {
  constructor(status, body) {
    super(body?.error ?? body?.message ?? `HTTP ${status}`);
    this.status = status;
    this.body = body;
  }
}

/** The business logic: validate, one synchronous INSERT, 201. Throws HttpError or anything. */
function createOrder(req) {
  const body = req.body;
  const ok = body !== null && typeof body === 'object' && !Array.isArray(body)
    && typeof body.sku === 'string' && Number.isInteger(body.quantity);
  if (!ok) throw new HttpError(400, { error: 'body must be {"sku": string, "quantity": integer}' });
  const intent = req.get('X-Intent') ?? null;
  const info = insertOrder.run(req.customer, body.sku, body.quantity, intent);
  return { status: 201, body: { order: { id: Number(info.lastInsertRowid), sku: body.sku, quantity: body.quantity } } };
}

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

/** createOrder with idemsim's points (used only when one is armed): the same statements. */
async function createOrderHooked(req, ctx) {
  const body = req.body;
  const ok = body !== null && typeof body === 'object' && !Array.isArray(body)
    && typeof body.sku === 'string' && Number.isInteger(body.quantity);
  if (!ok) throw new HttpError(400, { error: 'body must be {"sku": string, "quantity": integer}' });
  const intent = req.get('X-Intent') ?? null;
  if (STEPS) await hook(ctx, 'step', 'insert-row');
  const info = insertOrder.run(req.customer, body.sku, body.quantity, intent);
  // The INSERT autocommits: the points after the business write.
  if (ARMED.has('before-commit')) await hook(ctx, 'before-commit');
  if (ARMED.has('before-effect')) await hook(ctx, 'before-effect');
  if (ARMED.has('after-effect')) await hook(ctx, 'after-effect');
  if (ARMED.has('after-commit')) await hook(ctx, 'after-commit');
  if (STEPS) await hook(ctx, 'step', 'reply'); // a crash after the last step, before the answer
  return { status: 201, body: { order: { id: Number(info.lastInsertRowid), sku: body.sku, quantity: body.quantity } } };
}

function auth(req, res, next) {
  const m = /^Bearer\s+(\S.*)$/.exec(req.get('Authorization') ?? '');
  if (!m) {
    res.status(401).json({ error: 'missing or invalid Authorization: Bearer <customer>' });
    return;
  }
  req.customer = m[1].trim();
  next();
}

async function ordersWithIdempotency(req, res) {
  const idempotencyReq = {
    headers: req.headers,
    body: req.body,
    path: req.url,
    method: req.method,
  };
  let cached;
  try {
    cached = await idempotency.onRequest(idempotencyReq);
  } catch (err) {
    if (err instanceof IdempotencyError) {
      const status = idempotency2HttpCodeMap[err.code] || 500;
      if (err.code === IdempotencyErrorCodes.REQUEST_IN_PROGRESS) res.set('Retry-After', '1');
      res.status(status).json({ statusCode: status, message: err.message });
      return;
    }
    console.error(`server.mjs: onRequest: ${err?.stack ?? err}`);
    res.status(500).json({ statusCode: 500, message: 'Internal Server Error' });
    return;
  }

  if (cached) {
    // A replay (interceptor l.50-72).
    const status = cached.additional?.statusCode;
    if (status) res.status(status);
    for (const h of headers2Cache) if (cached.additional?.[h]) res.set(h, cached.additional[h]);
    res.set('Idempotent-Replayed', 'true');
    if (typeof cached.body !== 'undefined') res.send(JSON.stringify(cached.body));
    else res.send(JSON.stringify(cached.error ?? { statusCode: 500, message: 'Internal Server Error' }));
    return;
  }

  // First time: the handler, then onResponse.
  // idemsim: a hook context only when a point is armed (then the handler is awaited).
  const ctx = ARMED.size > 0
    ? { key: req.get('Idempotency-Key') || null, intent: req.get('X-Intent') ?? null,
        attempt: req.get('X-Attempt') ?? null, dropReply: false }
    : null;
  let result;
  try {
    result = ctx ? await createOrderHooked(req, ctx) : createOrder(req);
  } catch (err) {
    const status = err instanceof HttpError ? err.status : 500;
    const body = err instanceof HttpError ? err.body : { statusCode: 500, message: 'Internal Server Error' };
    if (!(err instanceof HttpError) && !(err instanceof HookFail)) console.error(`server.mjs: handler: ${err?.stack ?? err}`);
    // Error path (interceptor l.129-138): cache the error, not awaited, then answer.
    idempotency.onResponse(idempotencyReq, {
      additional: { statusCode: status, 'Content-Type': 'application/json; charset=utf-8' },
      error: body,
    }).catch(() => {});
    if (ctx?.dropReply) req.socket?.destroy(); // idemsim `drop`: the answer is lost
    res.status(status).json(body);
    return;
  }
  res.status(result.status);
  res.type('application/json; charset=utf-8');
  const additional = { statusCode: res.statusCode };
  for (const h of headers2Cache) {
    const v = res.getHeader(h);
    if (v) additional[h] = v;
  }
  try {
    await idempotency.onResponse(idempotencyReq, { additional, body: result.body });
  } catch (err) {
    // The interceptor's map(async ...) would reject here: Nest answers 500 (the row stays).
    console.error(`server.mjs: onResponse: ${err?.stack ?? err}`);
    if (ctx?.dropReply) req.socket?.destroy(); // idemsim `drop`: the answer is lost
    res.status(500).json({ statusCode: 500, message: 'Internal Server Error' });
    return;
  }
  if (ctx?.dropReply) req.socket?.destroy(); // idemsim `drop`: the outcome is stored, the answer lost
  res.send(JSON.stringify(result.body));
}

const app = express();
app.disable('x-powered-by');
app.disable('etag');
app.get('/health', (req, res) => res.status(200).json({ ok: true }));
app.post('/orders', auth, express.json(), (req, res, next) => {
  ordersWithIdempotency(req, res).catch(next);
});
app.use((req, res) => res.status(404).json({ error: 'not found' }));
// eslint-disable-next-line no-unused-vars
app.use((err, req, res, next) => {
  if (err?.type === 'entity.parse.failed') {
    res.status(400).json({ error: 'invalid JSON' });
    return;
  }
  const status = Number.isInteger(err?.status) && err.status >= 400 && err.status < 600 ? err.status : 500;
  if (status === 500) console.error(`server.mjs: ${err?.stack ?? err}`);
  res.status(status).json({ error: status === 500 ? 'internal error' : String(err?.message ?? err) });
});

const server = app.listen(PORT, '127.0.0.1');
server.on('error', (err) => {
  console.error(`server.mjs: listen: ${err?.message ?? err}`);
  process.exit(1);
});
const shutdown = () => {
  server.close();
  Promise.resolve(STORE === 'redis' ? storage.disconnect() : undefined).finally(() => {
    db.close();
    process.exit(0);
  });
};
process.on('SIGTERM', shutdown);
process.on('SIGINT', shutdown);
