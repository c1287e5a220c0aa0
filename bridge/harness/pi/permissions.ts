// Permission gate the boxctl bridge loads into Pi for retained sessions
// (--extension), in the TypeScript cli-bridge's protocol. Before Pi runs a
// tool that is not read-only, it asks the bridge through an rpc select
// dialog whose title ends with a marker: the bridge's nonce (written into
// this file when the bridge loads it) and the question's number. The title
// names the tool and, before the marker, its input as JSON, so the bridge
// can show both. The bridge answers allow_once or deny; the gate then
// reports the choice it applied (a notify of
// cli-bridge.permission-applied.v1:<token>:<choice>). An aborted turn
// dismisses the dialog, which blocks the call.
const bridgeNonce = "BRIDGE_NONCE";
const readOnly = new Set(["read", "grep", "find", "ls"]);
let asked = 0;

export default function (pi: any) {
  pi.on("tool_call", async (event: any, ctx: any) => {
    const tool = String(event.toolName);
    if (readOnly.has(tool)) return undefined;
    if (!ctx.hasUI) return { block: true, reason: "interactive approval is unavailable" };
    asked += 1;
    const token = `${bridgeNonce}-${asked}`;
    const input = JSON.stringify(event.input ?? {});
    const choice = await ctx.ui.select(`Permission: ${tool} ${input} [cli-bridge-marker:${token}]`, ["allow_once", "deny"], {
      signal: ctx.signal,
    });
    await ctx.ui.notify(`cli-bridge.permission-applied.v1:${token}:${String(choice)}`, "info");
    if (choice === "allow_once") return undefined;
    return { block: true, reason: `The ${tool} call was not approved.` };
  });
}
