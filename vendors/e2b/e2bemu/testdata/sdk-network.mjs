// The official E2B SDK's network options against the emulator: a sandbox
// created with `network` (allowOut, denyOut ALL_TRAFFIC) or with
// allowInternetAccess false reaches what its rules allow and nothing
// else, and updateNetwork replaces the rules of a running sandbox. Each
// step prints one line: {step, ok, detail, ms}. The test counts the bytes
// that reach its listeners; a step here only sees what the box saw.
// Arguments: the template, a run id, the allowed listener (IP:port), the
// allowed name (served on port 80 at the allowed IP), and a decoy (IP:port).
import { Sandbox, ALL_TRAFFIC } from 'e2b';

const [template, run, allowed, allowedName, decoy] = process.argv.slice(2);
const meta = { suite: 'sdk-network', run };
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

// tcp connects from the box to host:port, sends "probe" and prints "data N"
// for an answer, else "timeout" or "error CODE".
const tcp = (sbx, hostPort) => {
  const [h, p] = hostPort.split(':');
  const js = `const s=require("net").connect({host:"${h}",port:${p}},()=>s.write("probe"));` +
    `s.setTimeout(3000,()=>{console.log("timeout");s.destroy()});` +
    `s.on("data",d=>{console.log("data",d.length);s.destroy()});s.on("error",e=>console.log("error",e.code))`;
  return sbx.commands.run(`node -e '${js}'`).then((r) => r.stdout.trim());
};
const http = (sbx, name) =>
  sbx.commands.run(`curl -s --max-time 3 http://${name}/ || echo failed $?`).then((r) => r.stdout.trim());

let sbx;
await step('create with network: allowOut an IP and a name, denyOut ALL_TRAFFIC', async () => {
  sbx = await Sandbox.create(template, {
    timeoutMs: 300_000, metadata: meta,
    network: { allowOut: [allowed.split(':')[0], allowedName], denyOut: [ALL_TRAFFIC] },
  });
  const info = await sbx.getInfo();
  const n = info.network ?? {};
  const ok = JSON.stringify([...(n.allowOut ?? [])].sort()) === JSON.stringify([allowed.split(':')[0], allowedName].sort()) &&
    JSON.stringify(n.denyOut) === JSON.stringify([ALL_TRAFFIC]);
  return [ok, { network: n }];
});
if (!sbx) process.exit(1);

await step('the allowed IP is reached', async () => {
  const got = await tcp(sbx, allowed);
  return [got.startsWith('data'), got];
});

await step('the allowed name is reached (HTTP)', async () => {
  const got = await http(sbx, allowedName);
  return [got === 'allowed-host-ok', got];
});

await step('a destination not allowed is not reached', async () => {
  const got = await tcp(sbx, decoy);
  return [!got.startsWith('data'), got];
});

await step('updateNetwork: deny everything, the allowed IP is refused', async () => {
  await sbx.updateNetwork({ denyOut: [ALL_TRAFFIC] });
  const got = await tcp(sbx, allowed);
  const name = await http(sbx, allowedName);
  return [!got.startsWith('data') && name !== 'allowed-host-ok', { ip: got, name }];
});

await step('updateNetwork: allow the IP again, it is reached; the name stays refused', async () => {
  await sbx.updateNetwork({ allowOut: [allowed.split(':')[0]], denyOut: [ALL_TRAFFIC] });
  const got = await tcp(sbx, allowed);
  const name = await http(sbx, allowedName);
  return [got.startsWith('data') && name !== 'allowed-host-ok', { ip: got, name }];
});

let closed;
await step('create with allowInternetAccess false: nothing is reached', async () => {
  closed = await Sandbox.create(template, { timeoutMs: 300_000, metadata: meta, allowInternetAccess: false });
  const got = await tcp(closed, allowed);
  const info = await closed.getInfo();
  return [!got.startsWith('data') && info.allowInternetAccess === false, { got, allowInternetAccess: info.allowInternetAccess }];
});

await step('kill', async () => {
  const a = await sbx.kill();
  const b = await closed?.kill();
  return [a === true && b === true, { a, b }];
});

out({ done: true, failed });
