// Summarise burst data files: node analyze.mjs file.jsonl [...]
import fs from 'node:fs';
const pct = (xs, p) => { if (!xs.length) return NaN; const s = [...xs].sort((a, b) => a - b); return s[Math.min(s.length - 1, Math.floor(p * (s.length - 1) + 0.5))]; };
const f3 = (x) => (Number.isFinite(x) ? (x / 1000).toFixed(3) : '-');
const dist = (name, xs) => `${name.padEnd(44)} n=${String(xs.length).padStart(5)}  p10 ${f3(pct(xs, .1))}  p50 ${f3(pct(xs, .5))}  p90 ${f3(pct(xs, .9))}  p99 ${f3(pct(xs, .99))}  max ${f3(Math.max(...xs))} ms`;
const wilson = (k, n) => { const z = 1.96, p = k / n, d = 1 + z * z / n, c = (p + z * z / (2 * n)) / d, h = z * Math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / d; return [c - h, c + h]; };
for (const file of process.argv.slice(2)) {
  const R = fs.readFileSync(file, 'utf8').trim().split('\n').filter(Boolean).map((l) => JSON.parse(l));
  if (!R.length) continue;
  const { variant, procs, n, client, warm } = R[0];
  console.log(`\n### ${file}: ${variant}, ${procs} process(es), ${n} at once, client ${client}, warm-up ${warm ?? 0}, ${R.length} rounds`);
  console.log(`load avg (1/5/15) at start ${R[0].load.map((x) => x.toFixed(2)).join(' ')}, at end ${R.at(-1).load.map((x) => x.toFixed(2)).join(' ')}`);
  const hist = {};
  for (const r of R) hist[r.rows] = (hist[r.rows] ?? 0) + 1;
  console.log('rows per round: ' + Object.keys(hist).map(Number).sort((a, b) => a - b).map((k) => `${k}:${hist[k]}`).join('  '));
  const races = R.filter((r) => r.rows > 1).length, [lo, hi] = wilson(races, R.length);
  const bins = [[1, 1], [2, 4], [5, 9], [10, 99]].map(([a, b]) => `${a === b ? a : a + '-' + (b === 99 ? '' : b)}${b === 99 ? '+' : ''}: ${R.filter((r) => r.rows >= a && r.rows <= b).length}`);
  console.log(`race rate (rows > 1): ${races}/${R.length} = ${(100 * races / R.length).toFixed(1)} % (Wilson 95 % ${(100 * lo).toFixed(1)}-${(100 * hi).toFixed(1)} %); bins ${bins.join(', ')}; mean rows given a race ${(R.filter((r) => r.rows > 1).reduce((a, r) => a + r.rows, 0) / Math.max(1, races)).toFixed(2)}`);
  const statuses = {};
  for (const r of R) for (const x of r.results) { const k = x.status + (x.replayed ? 'R' : '') + (x.err ? `(${x.err})` : ''); statuses[k] = (statuses[k] ?? 0) + 1; }
  console.log('client statuses: ' + JSON.stringify(statuses));
  if (!R[0].trace.length) continue;
  // per-round trace analysis
  const M = { acc2read: [], acc2readFirst: [], read2lookup: [], read2lookupFirst: [], lookup2resume: [], insertBlock: [], saveBlock: [], txCommit: [], readSpread: [], firstBatchSpread: [], clientSendSpread: [], send2read: [], send2acc: [], passGap: [] };
  const batchVsRows = [];
  let predicted = 0, predictedN = 0, p1AccDuringBlock = 0, p1Count = 0;
  for (const r of R) {
    const by = {};
    for (const e of r.trace) { if (!String(e.attempt).startsWith('a')) continue; (by[e.attempt] ??= { process: e.process })[e.ev] = e; }
    const reqs = Object.values(by).filter((x) => x.read);
    if (!reqs.length) continue;
    reqs.sort((a, b) => a.read.t_us - b.read.t_us);
    const t0 = reqs[0].read.t_us;
    M.readSpread.push(reqs.at(-1).read.t_us - t0);
    const sends = r.results.map((x) => x.t_send);
    M.clientSendSpread.push(Math.max(...sends) - Math.min(...sends));
    // batches: (process, pass)
    const batches = {};
    for (const x of reqs) (batches[`${x.process}:${x.read.pass}`] ??= []).push(x);
    const firstOf = {};
    for (const x of reqs) firstOf[x.process] ??= `${x.process}:${x.read.pass}`;
    const fb = Object.values(firstOf).map((k) => batches[k]);
    const fbSize = fb.reduce((a, b) => a + b.length, 0);
    const fbSizes = Object.values(firstOf).map((k) => batches[k].length);
    batchVsRows.push([fbSizes.join('+'), r.rows, Object.values(batches).map((b) => b.length)]);
    predictedN++; if (fbSize === r.rows) predicted++;
    for (const b of fb) M.firstBatchSpread.push(b.at(-1).read.t_us - b[0].read.t_us);
    for (const x of reqs) {
      const res = r.results.find((q) => `a${q.i}` === x.read.attempt);
      if (x.read.accepted_us) { const d = x.read.t_us - x.read.accepted_us; (x === reqs[0] ? M.acc2readFirst : M.acc2read).push(d); if (res) M.send2acc.push(x.read.accepted_us - res.t_send); }
      if (res) M.send2read.push(x.read.t_us - res.t_send);
      if (x.lookup) (x === reqs[0] ? M.read2lookupFirst : M.read2lookup).push(x.lookup.t_us - x.read.t_us);
      if (x.resume && x.lookup) M.lookup2resume.push(x.resume.t_us - x.lookup.t_us);
      if (variant === 'check-first') {
        if (x.insert && x.resume) M.insertBlock.push(x.insert.t_us - x.resume.t_us);
        if (x.save && x.insert) M.saveBlock.push(x.save.t_us - x.insert.t_us);
      } else if (x.commit && (x.save || x.insert)) M.txCommit.push(x.commit.t_us - (x.save ?? x.insert).t_us);
    }
    // second batch of process 1: accepted while the first batch was blocking in SQLite?
    for (const p of Object.keys(firstOf)) {
      const keys = Object.keys(batches).filter((k) => k.startsWith(p + ':')).sort((a, b) => Number(a.split(':')[1]) - Number(b.split(':')[1]));
      if (keys.length < 2) continue;
      const b0 = batches[keys[0]], b1 = batches[keys[1]];
      const blockStart = Math.min(...b0.map((x) => (x.resume ?? x.lookup ?? x.read).t_us));
      const blockEnd = Math.max(...b0.map((x) => x.reply?.t_us ?? 0));
      M.passGap.push(b1[0].read.t_us - b0.at(-1).read.t_us);
      for (const x of b1) { p1Count++; if (x.read.accepted_us <= blockEnd) p1AccDuringBlock++; }
    }
  }
  console.log(`first poll-pass batch size (per process) vs rows: rows == sum of first-batch sizes in ${predicted}/${predictedN} rounds`);
  const bh = {};
  for (const [s, rows] of batchVsRows) { const k = `${s}→${rows}`; bh[k] = (bh[k] ?? 0) + 1; }
  console.log('  first-batch size → rows (count): ' + Object.entries(bh).sort((a, b) => b[1] - a[1]).map(([k, v]) => `${k} ×${v}`).join(', '));
  console.log('  batch sizes of the first 6 rounds: ' + batchVsRows.slice(0, 6).map((x) => `[${x[2].join(',')}]`).join(' '));
  for (const [k, v] of Object.entries(M)) if (v.length) console.log('  ' + dist(k, v));
  if (p1Count) console.log(`  2nd-batch requests accepted before the 1st batch's last reply: ${p1AccDuringBlock}/${p1Count}`);
}
