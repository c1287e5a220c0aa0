// The official E2B SDK's documented calls, run against the emulator with
// nothing but the environment `boxctl emulate e2b` prints (E2B_API_URL,
// E2B_SANDBOX_URL, E2B_DOMAIN, E2B_API_KEY). Each step checks the call's
// documented result and prints one line: {step, ok, detail, ms}.
// Arguments: the template, and a run id to tag the sandboxes with.
import { Sandbox, CommandExitError, NotFoundError, SandboxNotFoundError } from 'e2b';

const [template, run] = process.argv.slice(2);
const meta = { suite: 'sdk-scenario', run };
const out = (o) => console.log(JSON.stringify(o));

let failed = 0;
async function step(name, fn) {
  const t0 = performance.now();
  let ok = false;
  let detail;
  try {
    [ok, detail] = await fn();
  } catch (e) {
    detail = `threw ${e?.name}: ${e?.message}`;
  }
  if (!ok) failed++;
  out({ step: name, ok: !!ok, detail, ms: Math.round((performance.now() - t0) * 10) / 10 });
}
const eq = (got, want) => [JSON.stringify(got) === JSON.stringify(want), { got, want }];
const waitFor = async (cond, ms) => {
  const end = Date.now() + ms;
  while (Date.now() < end) {
    if (await cond()) return true;
    await new Promise((r) => setTimeout(r, 50));
  }
  return false;
};

let sbx;
let other;
await step('create', async () => {
  sbx = await Sandbox.create(template, { timeoutMs: 300_000, metadata: meta, envs: { GREETING: 'hello' } });
  return [/^[a-z0-9]+$/.test(sbx.sandboxId), { sandboxId: sbx.sandboxId }];
});
if (!sbx) process.exit(1);

await step('isRunning', async () => eq(await sbx.isRunning(), true));

await step('getInfo', async () => {
  const info = await sbx.getInfo();
  const ok = info.sandboxId === sbx.sandboxId && info.state === 'running' && info.metadata.run === run &&
    info.endAt > info.startedAt && info.templateId !== '';
  return [ok, info];
});

await step('commands.run: create env, default user and cwd', async () => {
  const r = await sbx.commands.run('echo "$GREETING"; id -un; pwd; echo "$HOME"');
  const [greeting, user, cwd, home] = r.stdout.trim().split('\n');
  return [r.exitCode === 0 && greeting === 'hello' && user !== 'root' && cwd === home, { ...r, user, cwd, home }];
});

await step('commands.run: envs, cwd and user root', async () => {
  const r = await sbx.commands.run('echo "$X"; pwd; id -u', { envs: { X: 'y' }, cwd: '/tmp', user: 'root' });
  return eq(r.stdout, 'y\n/tmp\n0\n');
});

await step('commands.run: exit code', async () => {
  try {
    await sbx.commands.run('echo out; echo err >&2; exit 3');
    return [false, 'no CommandExitError'];
  } catch (e) {
    return [e instanceof CommandExitError && e.exitCode === 3 && e.stdout === 'out\n' && e.stderr === 'err\n',
      { name: e.name, exitCode: e.exitCode, stdout: e.stdout, stderr: e.stderr }];
  }
});

await step('commands.run: streaming', async () => {
  const chunks = [];
  const errs = [];
  const r = await sbx.commands.run('for i in 1 2 3; do echo $i; sleep 0.2; done; echo e >&2', {
    onStdout: (d) => chunks.push([d, Date.now()]), onStderr: (d) => errs.push(d),
  });
  const spread = chunks.length > 1 ? chunks[chunks.length - 1][1] - chunks[0][1] : 0;
  return [chunks.map((c) => c[0]).join('') === '1\n2\n3\n' && chunks.length >= 2 && spread >= 200 && errs.join('') === 'e\n',
    { chunks: chunks.length, spreadMs: spread, stdout: r.stdout, stderr: errs.join('') }];
});

await step('commands: background, list, connect, kill', async () => {
  const h = await sbx.commands.run('sleep 120', { background: true });
  const listed = (await sbx.commands.list()).some((p) => p.pid === h.pid && p.cmd === '/bin/bash');
  const c = await sbx.commands.connect(h.pid);
  const killed = await sbx.commands.kill(h.pid);
  let exit;
  try { exit = (await c.wait()).exitCode; } catch (e) { exit = e.exitCode; }
  const gone = !(await sbx.commands.list()).some((p) => p.pid === h.pid);
  const again = await sbx.commands.kill(h.pid);
  return [listed && killed && exit !== 0 && gone && again === false, { pid: h.pid, listed, killed, exit, gone, again }];
});

await step('commands: stdin, sendStdin, closeStdin', async () => {
  let got = '';
  const h = await sbx.commands.run('cat; echo done', { background: true, stdin: true, onStdout: (d) => { got += d; } });
  await sbx.commands.sendStdin(h.pid, 'line one\n');
  await sbx.commands.sendStdin(h.pid, 'line two\n');
  await sbx.commands.closeStdin(h.pid);
  const r = await h.wait();
  return [r.exitCode === 0 && r.stdout === 'line one\nline two\ndone\n' && got === r.stdout, r];
});

await step('commands: SIGTERM through the handle', async () => {
  const h = await sbx.commands.run("trap 'echo term; exit 7' TERM; while :; do sleep 0.1; done", { background: true });
  await new Promise((r) => setTimeout(r, 300));
  await h.kill();
  let exit;
  try { exit = (await h.wait()).exitCode; } catch (e) { exit = e.exitCode ?? e.message; }
  return [exit !== 0, { exit }];
});

await step('pty: a real terminal, input and resize', async () => {
  const dec = new TextDecoder();
  let data = '';
  const p = await sbx.pty.create({ cols: 100, rows: 30, onData: (d) => { data += dec.decode(d); }, timeoutMs: 30_000 });
  await sbx.pty.sendInput(p.pid, new TextEncoder().encode('tty; stty size\n'));
  const first = await waitFor(() => /30 100/.test(data), 10_000);
  await sbx.pty.resize(p.pid, { cols: 120, rows: 40 });
  await sbx.pty.sendInput(p.pid, new TextEncoder().encode('stty size; exit\n'));
  const r = await p.wait();
  const ok = first && /\/dev\/pts\/\d+/.test(data) && /40 120/.test(data) && r.exitCode === 0;
  return [ok, { data: data.slice(-400), exitCode: r.exitCode }];
});

await step('files.write and read', async () => {
  const info = await sbx.files.write('/tmp/sdk/a.txt', 'hello file');
  const text = await sbx.files.read('/tmp/sdk/a.txt');
  const bytes = await sbx.files.read('/tmp/sdk/a.txt', { format: 'bytes' });
  return [info.path === '/tmp/sdk/a.txt' && info.name === 'a.txt' && text === 'hello file' && bytes.length === 10, { info, text }];
});

await step('files.write: several files in one multipart request, relative paths under home', async () => {
  const infos = await sbx.files.write([{ path: '/tmp/sdk/m1.txt', data: 'one' }, { path: 'rel/m2.txt', data: new Blob(['two']) }]);
  const home = (await sbx.commands.run('echo $HOME')).stdout.trim();
  const two = await sbx.files.read(home + '/rel/m2.txt');
  return [infos.length === 2 && infos[1].path === home + '/rel/m2.txt' && two === 'two', { infos, two }];
});

await step('files: user root and the image user', async () => {
  await sbx.files.write('/root/r.txt', 'root only', { user: 'root' });
  const owner = (await sbx.files.getInfo('/root/r.txt', { user: 'root' })).owner;
  let denied = false;
  try { await sbx.files.read('/root/r.txt'); } catch (e) { denied = true; }
  const mine = await sbx.files.write('/tmp/sdk/mine.txt', 'x');
  const mineOwner = (await sbx.files.getInfo(mine.path)).owner;
  return [owner === 'root' && denied && mineOwner !== 'root', { owner, denied, mineOwner }];
});

await step('files.read: a missing file is NotFoundError', async () => {
  try {
    await sbx.files.read('/tmp/sdk/missing');
    return [false, 'read succeeded'];
  } catch (e) {
    return [e instanceof NotFoundError, `${e.name}: ${e.message}`];
  }
});

await step('files.makeDir', async () => {
  const made = await sbx.files.makeDir('/tmp/sdk/d/e');
  const again = await sbx.files.makeDir('/tmp/sdk/d/e');
  await sbx.files.write('/tmp/sdk/d/e/deep.txt', 'deep');
  return eq([made, again], [true, false]);
});

await step('files.list with depth', async () => {
  const one = (await sbx.files.list('/tmp/sdk')).map((e) => e.name).sort();
  const two = (await sbx.files.list('/tmp/sdk', { depth: 3 })).map((e) => e.path).sort();
  const dir = (await sbx.files.list('/tmp/sdk')).find((e) => e.name === 'd');
  const ok = one.includes('a.txt') && one.includes('d') && !one.includes('deep.txt') &&
    two.includes('/tmp/sdk/d/e/deep.txt') && dir.type === 'dir';
  return [ok, { one, two, dirType: dir?.type }];
});

await step('files.getInfo', async () => {
  const i = await sbx.files.getInfo('/tmp/sdk/a.txt');
  const ok = i.name === 'a.txt' && i.type === 'file' && i.size === 10 && i.path === '/tmp/sdk/a.txt' &&
    /^-rw/.test(i.permissions) && i.modifiedTime instanceof Date && Math.abs(Date.now() - i.modifiedTime) < 600_000;
  return [ok, i];
});

await step('files.exists', async () => eq([await sbx.files.exists('/tmp/sdk/a.txt'), await sbx.files.exists('/tmp/sdk/nope')], [true, false]));

await step('files.rename', async () => {
  const i = await sbx.files.rename('/tmp/sdk/a.txt', '/tmp/sdk/moved/b.txt');
  const ok = i.path === '/tmp/sdk/moved/b.txt' && !(await sbx.files.exists('/tmp/sdk/a.txt')) &&
    (await sbx.files.read('/tmp/sdk/moved/b.txt')) === 'hello file';
  return [ok, i];
});

await step('files.remove', async () => {
  await sbx.files.remove('/tmp/sdk/d');
  return eq(await sbx.files.exists('/tmp/sdk/d/e/deep.txt'), false);
});

await step('files.watchDir', async () => {
  const events = [];
  const w = await sbx.files.watchDir('/tmp/sdk', (e) => events.push(e));
  await sbx.files.write('/tmp/sdk/watched.txt', 'w');
  const seen = await waitFor(() => events.some((e) => e.name === 'watched.txt' && e.type === 'create'), 10_000);
  await sbx.files.remove('/tmp/sdk/watched.txt');
  const removed = await waitFor(() => events.some((e) => e.name === 'watched.txt' && e.type === 'remove'), 10_000);
  await w.stop();
  return [seen && removed, events];
});

await step('setTimeout', async () => {
  await sbx.setTimeout(60_000);
  const left = (await sbx.getInfo()).endAt - Date.now();
  return [left > 50_000 && left <= 61_000, { leftMs: left }];
});

await step('getMetrics', async () => {
  const m = await sbx.getMetrics();
  const ok = m.length >= 1 && m[0].cpuCount > 0 && m[0].memTotal > 0 && m[0].memUsed > 0 && m[0].diskTotal > 0 &&
    m[0].timestamp instanceof Date;
  return [ok, m];
});

await step('Sandbox.list: metadata filter and paging', async () => {
  other = await Sandbox.create(template, { timeoutMs: 120_000, metadata: { ...meta, second: 'yes' } });
  const p = Sandbox.list({ query: { metadata: meta }, limit: 1 });
  const ids = [];
  let pages = 0;
  while (p.hasNext) {
    ids.push(...(await p.nextItems()).map((s) => s.sandboxId));
    pages++;
  }
  const only = await Sandbox.list({ query: { metadata: { ...meta, second: 'yes' } } }).nextItems();
  const ok = pages === 2 && ids.length === 2 && ids.includes(sbx.sandboxId) && ids.includes(other.sandboxId) &&
    only.length === 1 && only[0].sandboxId === other.sandboxId;
  return [ok, { pages, ids, only: only.map((s) => s.sandboxId) }];
});

await step('pause', async () => {
  const h = await sbx.commands.run('echo kept >/tmp/sdk/kept.txt');
  const first = await sbx.pause();
  const second = await sbx.pause();
  const paused = await Sandbox.list({ query: { metadata: meta, state: ['paused'] } }).nextItems();
  const running = await Sandbox.list({ query: { metadata: meta, state: ['running'] } }).nextItems();
  const ok = h.exitCode === 0 && first === true && second === false && paused.length === 1 &&
    paused[0].sandboxId === sbx.sandboxId && paused[0].state === 'paused' && !running.some((s) => s.sandboxId === sbx.sandboxId) &&
    (await sbx.isRunning()) === false;
  return [ok, { first, second, paused: paused.map((s) => s.state) }];
});

await step('Sandbox.connect resumes a paused sandbox', async () => {
  const s = await Sandbox.connect(sbx.sandboxId, { timeoutMs: 120_000 });
  const r = await s.commands.run('cat /tmp/sdk/kept.txt');
  const info = await s.getInfo();
  return [r.stdout === 'kept\n' && info.state === 'running' && (await s.isRunning()), { stdout: r.stdout, state: info.state }];
});

await step('Sandbox.connect a running sandbox without a timeout', async () => {
  const s = await Sandbox.connect(other.sandboxId);
  const r = await s.commands.run('echo ok');
  return eq(r.stdout, 'ok\n');
});

let snap;
await step('createSnapshot of a running sandbox', async () => {
  snap = await sbx.createSnapshot();
  const info = await sbx.getInfo();
  return [/^[a-z0-9]+:default$/.test(snap.snapshotId) && snap.names.length === 0 && info.state === 'running', { snap, state: info.state }];
});

await step('Sandbox.listSnapshots of a sandbox', async () => {
  const items = await Sandbox.listSnapshots({ sandboxId: sbx.sandboxId }).nextItems();
  return [items.length === 1 && items[0].snapshotId === snap?.snapshotId, items];
});

let fromSnap;
await step('Sandbox.create from a snapshot has its disk', async () => {
  fromSnap = await Sandbox.create(snap.snapshotId, { timeoutMs: 60_000 });
  const r = await fromSnap.commands.run('cat /tmp/sdk/kept.txt');
  const info = await fromSnap.getInfo();
  return [r.stdout === 'kept\n' && info.templateId === snap.snapshotId.split(':')[0], { stdout: r.stdout, templateId: info.templateId }];
});

await step('Sandbox.deleteSnapshot: refused while in use, then true, then false', async () => {
  let refused;
  try {
    await Sandbox.deleteSnapshot(snap.snapshotId);
    refused = 'deleted while a sandbox of it runs';
  } catch (e) {
    refused = /running sandboxes using it/.test(e.message) ? true : `${e.name}: ${e.message}`;
  }
  await fromSnap?.kill();
  const deleted = await Sandbox.deleteSnapshot(snap.snapshotId);
  const again = await Sandbox.deleteSnapshot(snap.snapshotId);
  return [refused === true && deleted === true && again === false, { refused, deleted, again }];
});

await step('Sandbox.fork: forks with the disk, the source running on', async () => {
  const before = await sbx.getInfo();
  const forks = await sbx.fork({ count: 2, timeoutMs: 60_000 });
  const made = forks.filter((f) => f instanceof Sandbox);
  try {
    const ids = new Set(made.map((f) => f.sandboxId));
    const reads = await Promise.all(made.map((f) => f.commands.run('cat /tmp/sdk/kept.txt')));
    const infos = await Promise.all(made.map((f) => f.getInfo()));
    const after = await sbx.getInfo();
    const ok = made.length === 2 && ids.size === 2 && !ids.has(sbx.sandboxId) &&
      reads.every((r) => r.stdout === 'kept\n') &&
      infos.every((i) => i.state === 'running' && i.templateId === before.templateId && i.metadata.run === run) &&
      after.state === 'running' && after.endAt.getTime() === before.endAt.getTime();
    return [ok, { forks: forks.map((f) => (f instanceof Error ? `${f.name}: ${f.message}` : f.sandboxId)), before, after }];
  } finally {
    await Promise.all(made.map((f) => f.kill()));
  }
});

await step('not emulated: a typed 501 naming the feature', async () => {
  try {
    await sbx.updateNetwork({ denyOut: ['10.0.0.0/8'] });
    return [false, 'network update succeeded'];
  } catch (e) {
    return [/501/.test(e.message) && /denyOut/.test(e.message) && /not emulated/.test(e.message), `${e.name}: ${e.message}`];
  }
});

await step('kill', async () => {
  const first = await sbx.kill();
  const second = await Sandbox.kill(sbx.sandboxId);
  await other.kill();
  let notFound = false;
  try { await sbx.getInfo(); } catch (e) { notFound = e instanceof SandboxNotFoundError || e instanceof NotFoundError; }
  return [first === true && second === false && notFound && (await sbx.isRunning()) === false, { first, second, notFound }];
});

out({ done: true, failed });
