// Served-model probe the boxctl bridge loads into opencode. opencode's
// output never names the model that served a request, so this plugin reads
// it from each model API answer (the Openai-Model header, else the first
// "model" field of the body: Anthropic's message_start, a Responses
// response.created, a Chat Completions chunk) and prints it on stdout as a
// line of its own, {"type":"boxctl.served_model","model":"..."}, beside
// opencode's JSON events. The answer reaches opencode unchanged.
const modelPaths = /\/(messages|responses|chat\/completions)$/;
const modelField = /"model"\s*:\s*"((?:[^"\\]|\\.)*)"/;
const maxScan = 64 << 10;
const probe = Symbol.for("boxctl.servedModel");

function report(model) {
  if (model) process.stdout.write(JSON.stringify({ type: "boxctl.served_model", model }) + "\n");
}

async function scan(body) {
  const reader = body.getReader();
  const decoder = new TextDecoder();
  let seen = "";
  try {
    while (seen.length < maxScan) {
      const { done, value } = await reader.read();
      if (done) break;
      seen += decoder.decode(value, { stream: true });
      const m = modelField.exec(seen);
      if (m) {
        report(JSON.parse('"' + m[1] + '"'));
        break;
      }
    }
  } catch {
    // The answer failed or was cancelled: nothing to report.
  } finally {
    reader.cancel().catch(() => {});
  }
}

export const BoxctlServedModel = async () => {
  const base = globalThis.fetch;
  // opencode may load the plugin more than once in a process.
  if (base[probe]) return {};
  const probed = async (input, init) => {
    const res = await base(input, init);
    let path = "";
    try {
      path = new URL(typeof input === "string" || input instanceof URL ? input : input.url).pathname;
    } catch {}
    if (!res.ok || !res.body || !modelPaths.test(path)) return res;
    const header = res.headers.get("openai-model");
    if (header) {
      report(header);
      return res;
    }
    const [mine, theirs] = res.body.tee();
    scan(mine);
    return new Response(theirs, { status: res.status, statusText: res.statusText, headers: res.headers });
  };
  probed[probe] = true;
  globalThis.fetch = probed;
  return {};
};
