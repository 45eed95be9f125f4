import net from 'node:net';
import { spawn } from 'node:child_process';
let pass = 0, marked = false; const log = [];
const mark = () => { if (!marked) { marked = true; setImmediate(() => { pass++; marked = false; }); } };
const s = net.createServer((sock) => { mark(); log.push(pass); if (log.length === 1) { const t = Date.now(); while (Date.now() - t < 300); } sock.on('data', () => sock.end()); });
s.listen(0, '127.0.0.1', () => {
  const port = s.address().port;
  const c = spawn('node', ['-e', `const net=require('net');let n=0;for(let i=0;i<20;i++){const k=net.connect(${port},'127.0.0.1',()=>{k.write('x')});k.on('data',()=>{k.end();if(++n==20)process.exit(0)})}`]);
  // block the server loop 500 ms so that all 20 connections are complete in the kernel's accept queue

  c.on('exit', () => { const h = {}; for (const p of log) h[p] = (h[p] ?? 0) + 1; console.log('accepts per pass', JSON.stringify(h)); process.exit(0); });
});
setTimeout(() => process.exit(1), 10000);
