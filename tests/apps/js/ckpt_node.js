// ckpt_node.js STEPS WORKDIR: a Node.js program through checkpoints. Each step grows and walks
// V8's heap (objects, a Map, JSON), hashes with OpenSSL, writes and reads a file through libuv's
// thread pool and asks a worker thread (another V8 isolate) for a square. Prints `step K` and
// ends with `DONE checksum=H steps=N`; any wrong answer fails the run.
'use strict';
const crypto = require('crypto');
const fs = require('fs');
const path = require('path');
const { Worker } = require('worker_threads');

const steps = Number(process.argv[2] || 60);
const work = process.argv[3] || '.';
if (!Number.isInteger(steps) || steps < 1) {
  console.error('usage: ckpt_node.js STEPS WORKDIR');
  process.exit(2);
}

const worker = new Worker(
  "const { parentPort } = require('worker_threads');" +
    'parentPort.on("message", (k) => parentPort.postMessage(k * k));',
  { eval: true },
);
function askWorker(k) {
  return new Promise((resolve) => worker.once('message', resolve).postMessage(k));
}
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
function fail(msg) {
  console.error(`ckpt_node: FAIL: ${msg}`);
  process.exit(1);
}

const kept = new Map(); // grows every step: old objects stay reachable across checkpoints
let checksum = crypto.createHash('sha256');

async function step(k) {
  const objs = [];
  for (let i = 0; i < 2000; i++) objs.push({ k, i, s: `v${k * 7919 + i}` });
  kept.set(k, objs);
  const back = JSON.parse(JSON.stringify(objs));
  if (back.length !== 2000 || back[1999].s !== `v${k * 7919 + 1999}`) fail(`json at step ${k}`);
  for (const [j, list] of kept) {
    if (list[j % 2000].k !== j || list[j % 2000].s !== `v${j * 7919 + (j % 2000)}`)
      fail(`object of step ${j} changed at step ${k}`);
  }
  const digest = crypto.createHash('sha256').update(`step ${k}`).digest('hex');
  const file = path.join(work, `node_step_${k % 3}.txt`);
  await fs.promises.writeFile(file, digest);
  if ((await fs.promises.readFile(file, 'utf8')) !== digest) fail(`file at step ${k}`);
  const square = await askWorker(k);
  if (square !== k * k) fail(`worker said ${square} for ${k}`);
  checksum.update(`${k}:${digest}:${square}`);
  console.log(`step ${k}`);
}

(async () => {
  for (let k = 1; k <= steps; k++) {
    await step(k);
    await sleep(40);
  }
  console.log(`DONE checksum=${checksum.digest('hex').slice(0, 16)} steps=${steps}`);
  await worker.terminate();
})();
