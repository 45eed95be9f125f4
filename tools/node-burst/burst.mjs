// Burst client: starts real server processes per round (fresh temp db), fires N POSTs at once
// with the same key, counts rows, and collects the servers' traces.
// Usage: node burst.mjs <variant> <procs> <n> <rounds> <client: fetch|http> <out.jsonl> [trace:1|0]
// Every wait is bounded; children are SIGKILLed on exit.
import { spawn } from 'node:child_process';
import http from 'node:http';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';
const here = path.dirname(fileURLToPath(import.meta.url));
const Database = createRequire(import.meta.url)(path.join(here, '../../targets/node/node_modules/better-sqlite3'));

const [variant, procsS, nS, roundsS, client, out, traceS = '1', warmS = '0'] = process.argv.slice(2);
const WARM = Number(warmS);
const PROCS = Number(procsS), N = Number(nS), ROUNDS = Number(roundsS), TRACE = traceS === '1';
const SERVER = path.join(here, '../../targets/node/server.mjs');
const B = '{"item":"test-item","qty":2}';
const nowUs = () => performance.timeOrigin * 1000 + performance.now() * 1000;
const children = new Set();
const killAll = () => { for (const c of children) { try { c.kill('SIGKILL'); } catch {} } };
process.on('exit', killAll);
process.on('SIGINT', () => { killAll(); process.exit(130); });
const globalTimer = setTimeout(() => { console.error('global timeout'); killAll(); process.exit(4); }, 20 * 60 * 1000);

function withTimeout(p, ms, what) {
  let t;
  return Promise.race([p, new Promise((_, rej) => { t = setTimeout(() => rej(new Error(`timeout: ${what}`)), ms); })]).finally(() => clearTimeout(t));
}

async function start(i, dir) {
  const env = { ...process.env, VARIANT: variant, IDEMSIM_DB: path.join(dir, 'db.sqlite'), IDEMSIM_PROCESS: String(i),
    IDEMSIM_BUSY_TIMEOUT_MS: '5000', IDEMSIM_POINTS: '', IDEMSIM_HOOK: 'http://127.0.0.1:9', IDEMSIM_PROVIDER: 'http://127.0.0.1:9' };
  if (TRACE) env.IDEMSIM_TRACE = path.join(dir, 'trace.jsonl');
  const c = spawn('node', [SERVER], { env, stdio: ['ignore', 'pipe', 'pipe'] });
  children.add(c);
  c.stderr.on('data', (d) => fs.appendFileSync(path.join(dir, 'stderr.txt'), d));
  const port = await withTimeout(new Promise((resolve, reject) => {
    let buf = '';
    c.stdout.on('data', (d) => { buf += d; const m = buf.match(/IDEMSIM_LISTENING (\d+)/); if (m) resolve(Number(m[1])); });
    c.on('exit', (code) => reject(new Error(`server exited ${code}`)));
  }), 10000, 'listening');
  return { c, port };
}

function postHttp(port, i) {
  return new Promise((resolve) => {
    const t_send = nowUs();
    let t_conn = null;
    const req = http.request({ host: '127.0.0.1', port, method: 'POST', path: '/api/orders', agent: false,
      headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(B), 'x-user': 'u1',
        'idempotency-key': 'k1', 'x-intent': 'i1', 'x-attempt': `a${i}` } }, (res) => {
      let body = '';
      res.on('data', (c) => (body += c));
      res.on('end', () => resolve({ i, t_send, t_conn, t_done: nowUs(), status: res.statusCode, replayed: res.headers['idempotent-replayed'] === 'true', body }));
    });
    req.on('socket', (s) => s.once('connect', () => { t_conn = nowUs(); }));
    req.setTimeout(10000, () => req.destroy(new Error('timeout')));
    req.on('error', (e) => resolve({ i, t_send, t_done: nowUs(), status: 0, err: e.code ?? e.message }));
    req.end(B);
  });
}
async function postFetch(port, i) {
  const t_send = nowUs();
  try {
    const r = await fetch(`http://127.0.0.1:${port}/api/orders`, { method: 'POST', body: B, signal: AbortSignal.timeout(10000),
      headers: { 'content-type': 'application/json', 'x-user': 'u1', 'idempotency-key': 'k1', 'x-intent': 'i1', 'x-attempt': `a${i}` } });
    const body = await r.text();
    return { i, t_send, t_done: nowUs(), status: r.status, replayed: r.headers.get('idempotent-replayed') === 'true', body };
  } catch (e) {
    return { i, t_send, t_done: nowUs(), status: 0, err: e.cause?.code ?? e.message };
  }
}
function postWarm(port, w) {
  return new Promise((resolve) => {
    const req = http.request({ host: '127.0.0.1', port, method: 'POST', path: '/api/orders', agent: false,
      headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(B), 'x-user': 'u1',
        'idempotency-key': `w${w}`, 'x-intent': 'warm', 'x-attempt': `w${w}` } }, (res) => { res.resume(); res.on('end', resolve); });
    req.setTimeout(10000, () => req.destroy(new Error('timeout')));
    req.on('error', resolve);
    req.end(B);
  });
}
const post = client === 'http' ? postHttp : postFetch;

// Warm the client up (undici's lazy loading, JIT) against a throwaway server.
{
  const s = http.createServer((q, r) => { q.resume(); q.on('end', () => r.end('{}')); });
  await new Promise((r) => s.listen(0, '127.0.0.1', r));
  for (let k = 0; k < 3; k++) await Promise.all(Array.from({ length: N }, (_, i) => post(s.address().port, i)));
  await new Promise((r) => s.close(r));
}

const load0 = os.loadavg();
fs.writeFileSync(out, '');
for (let round = 0; round < ROUNDS; round++) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'burst-'));
  const servers = [];
  try {
    for (let p = 1; p <= PROCS; p++) servers.push(await start(p, dir));
    for (let w = 0; w < WARM; w++) for (const s of servers) await postWarm(s.port, w);
    await new Promise((r) => setTimeout(r, 50));
    const t_fire = nowUs();
    const results = await withTimeout(Promise.all(Array.from({ length: N }, (_, i) => post(servers[i % PROCS].port, i))), 15000, 'burst');
    await new Promise((r) => setTimeout(r, 20));
    for (const s of servers) s.c.kill('SIGKILL');
    await withTimeout(Promise.all(servers.map((s) => (s.c.exitCode !== null || s.c.signalCode !== null) ? null : new Promise((r) => s.c.on('exit', r)))), 5000, 'exit');
    for (const s of servers) children.delete(s.c);
    const d = new Database(path.join(dir, 'db.sqlite'), { readonly: true, fileMustExist: true });
    const rows = d.prepare("SELECT count(*) n FROM rows WHERE intent = 'i1'").get().n;
    const keys = d.prepare('SELECT count(*) n FROM keys').get().n;
    d.close();
    const trace = TRACE && fs.existsSync(path.join(dir, 'trace.jsonl'))
      ? fs.readFileSync(path.join(dir, 'trace.jsonl'), 'utf8').split('\n').filter(Boolean).map((l) => JSON.parse(l)) : [];
    const stderr = fs.existsSync(path.join(dir, 'stderr.txt')) ? fs.readFileSync(path.join(dir, 'stderr.txt'), 'utf8') : '';
    fs.appendFileSync(out, JSON.stringify({ round, variant, procs: PROCS, n: N, client, warm: WARM, t_fire, rows, keys, results, trace, stderr: stderr.slice(0, 500), load: os.loadavg() }) + '\n');
    process.stdout.write(`${rows} `);
  } finally {
    for (const s of servers) { try { s.c.kill('SIGKILL'); } catch {} children.delete(s.c); }
    fs.rmSync(dir, { recursive: true, force: true });
  }
}
process.stdout.write(`\nload before ${load0.map((x) => x.toFixed(2)).join(' ')} after ${os.loadavg().map((x) => x.toFixed(2)).join(' ')}\n`);
clearTimeout(globalTimer);
