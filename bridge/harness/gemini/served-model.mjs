// Preloaded by `gemini --acp` (NODE_OPTIONS --import): reports the model
// that served each Generative Language API answer, as the answer names it
// (modelVersion), on stdout as a line of its own:
//   {"type":"boxctl_served_model","model":"..."}
// The protocol's own messages name only the model the CLI asked for. The
// line goes through the stream the protocol writes to, whole, so it never
// splits a message. The answer reaches the CLI unchanged.
const write = process.stdout.write.bind(process.stdout);
const origFetch = globalThis.fetch;
const answers = /:(stream)?[gG]enerateContent\b/;
const version = /"modelVersion"\s*:\s*"((?:[^"\\]|\\.)+)"/;

globalThis.fetch = async function fetch(input, init) {
  const res = await origFetch(input, init);
  const url = typeof input === "string" ? input : input instanceof URL ? input.href : input?.url ?? "";
  if (!answers.test(url) || !res.body) {
    return res;
  }
  const [mine, theirs] = res.body.tee();
  watch(mine.getReader()).catch(() => {});
  return new Response(theirs, { status: res.status, statusText: res.statusText, headers: res.headers });
};

async function watch(reader) {
  const decoder = new TextDecoder();
  let seen = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) {
      return;
    }
    seen += decoder.decode(value, { stream: true });
    const m = version.exec(seen);
    if (m) {
      write(JSON.stringify({ type: "boxctl_served_model", model: JSON.parse('"' + m[1] + '"') }) + "\n");
      await reader.cancel();
      return;
    }
    if (seen.length > 1 << 16) {
      seen = seen.slice(-4096);
    }
  }
}
