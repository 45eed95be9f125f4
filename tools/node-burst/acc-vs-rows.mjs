import fs from 'node:fs';
for (const f of process.argv.slice(2)) {
  const R = fs.readFileSync(f, 'utf8').trim().split('\n').map((l) => JSON.parse(l));
  const tab = {}; const gapR = [], gapN = [];
  for (const r of R) {
    if (r.procs !== 1) continue;
    const reads = r.trace.filter((e) => e.ev === 'read' && String(e.attempt).startsWith('a')).sort((a, b) => a.t_us - b.t_us);
    const first = reads[0];
    const accBefore = reads.filter((e) => e.accepted_us < first.t_us).length;
    const k = `${accBefore}`; (tab[k] ??= []).push(r.rows);
    (r.rows > 1 ? gapR : gapN).push((first.t_us - Math.min(...reads.map((e) => e.accepted_us))) / 1000);
  }
  console.log(f);
  for (const k of Object.keys(tab).sort((a, b) => a - b)) { const v = tab[k]; console.log(`  accepted before first read = ${k.padStart(2)}: rounds ${String(v.length).padStart(3)}, rows: ${v.sort((a, b) => a - b).join(',')}`); }
  const p = (xs, q) => { const s = [...xs].sort((a, b) => a - b); return s.length ? s[Math.floor(q * (s.length - 1))].toFixed(2) : '-'; };
  console.log(`  first accept -> first read (ms): racing rounds p10 ${p(gapR, .1)} p50 ${p(gapR, .5)} p90 ${p(gapR, .9)} (n=${gapR.length}); 1-row rounds p10 ${p(gapN, .1)} p50 ${p(gapN, .5)} p90 ${p(gapN, .9)} (n=${gapN.length})`);
}
