// The official E2B SDK's own retry behaviour against the emulator's fault
// switches: sequential creates while a share of control plane answers are
// 429 (with Retry-After) or 503. The SDK retries a 429 that carries
// Retry-After (up to its `retries`, 3 by default) and throws a 503 as
// ServiceBusyError; a create whose answer was lost leaves a sandbox that
// only a metadata list finds. Arguments: template, run id, creates.
// Prints one line per create and a summary of what the SDK saw.
import { Sandbox, RateLimitError, ServiceBusyError } from 'e2b';

const [template, run, n] = process.argv.slice(2);
const out = (o) => console.log(JSON.stringify(o));
const seen = { ok: 0, rateLimited: 0, busy: 0, other: 0 };
const made = [];
for (let i = 0; i < Number(n); i++) {
  const t0 = performance.now();
  try {
    const s = await Sandbox.create(template, { timeoutMs: 120_000, metadata: { run } });
    made.push(s.sandboxId);
    seen.ok++;
    out({ create: i, outcome: 'ok', ms: Math.round(performance.now() - t0) });
  } catch (e) {
    const kind = e instanceof RateLimitError ? 'rateLimited' : e instanceof ServiceBusyError ? 'busy' : 'other';
    seen[kind]++;
    out({ create: i, outcome: kind, error: `${e.name}: ${e.message}`, ms: Math.round(performance.now() - t0) });
  }
}
// Lists go through the same faults: the SDK's paginator, retried here on
// the typed errors the SDK documents for them.
let listed;
for (let attempt = 0; attempt < 50 && !listed; attempt++) {
  try {
    const ids = [];
    const p = Sandbox.list({ query: { metadata: { run } } });
    while (p.hasNext) ids.push(...(await p.nextItems()).map((s) => s.sandboxId));
    listed = ids;
  } catch (e) {
    if (!(e instanceof RateLimitError || e instanceof ServiceBusyError)) throw e;
  }
}
const killed = [];
for (const id of listed ?? []) {
  for (let attempt = 0; attempt < 50; attempt++) {
    try {
      await Sandbox.kill(id);
      killed.push(id);
      break;
    } catch (e) {
      if (!(e instanceof RateLimitError || e instanceof ServiceBusyError)) throw e;
    }
  }
}
out({ summary: true, seen, made, listed, killed });
