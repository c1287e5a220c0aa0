// Permission gate the boxctl bridge loads into Pi for retained sessions
// (--extension). Before Pi runs a tool that is not read-only, it asks the
// bridge through an rpc confirm dialog; the bridge turns the question into
// an interaction and answers it as the session's caller or policy decides.
// The dialog's message is a JSON object naming the tool and its input, so
// the bridge can show both. An aborted turn dismisses the dialog, which
// blocks the call.
const readOnly = new Set(["read", "grep", "find", "ls"]);

export default function (pi: any) {
  pi.on("tool_call", async (event: any, ctx: any) => {
    const tool = String(event.toolName);
    if (readOnly.has(tool)) return undefined;
    const question = JSON.stringify({ boxctl: "tool_permission", tool, input: event.input ?? {} });
    const allowed = await ctx.ui.confirm(`Allow ${tool}?`, question, { signal: ctx.signal });
    if (allowed) return undefined;
    return { block: true, reason: `The ${tool} call was not approved.` };
  });
}
