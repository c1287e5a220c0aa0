// The inspector's page: plain JavaScript, no build step. Every value from
// the server goes into the page as text (textContent), never as markup.
"use strict";

const inspector = { csrf: "", tracing: false, stream: null, box: null, sentAt: 0, firstEventAt: 0 };
window.inspector = inspector;

function el(tag, attrs, ...kids) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === "class") e.className = v;
    else if (k.startsWith("on")) e.addEventListener(k.slice(2), v);
    else if (v !== undefined && v !== null && v !== false) e.setAttribute(k, v === true ? "" : v);
  }
  for (const k of kids.flat()) {
    if (k === null || k === undefined) continue;
    e.append(k instanceof Node ? k : document.createTextNode(String(k)));
  }
  return e;
}

function showError(err) {
  const msg = err && err.type ? `${err.type}: ${err.message}` : String(err && err.message || err);
  document.getElementById("errors").append(el("div", { class: "error" }, msg));
}

function clearErrors() { document.getElementById("errors").replaceChildren(); }

function notice(msg) { document.getElementById("notice").textContent = msg; }

// api calls the server; a refusal throws its typed error.
async function api(method, path, body) {
  const opts = { method, credentials: "same-origin", headers: {} };
  if (method !== "GET") {
    opts.headers["X-CSRF-Token"] = inspector.csrf;
    opts.headers["Content-Type"] = "application/json";
    opts.body = JSON.stringify(body || {});
  }
  let resp;
  try {
    resp = await fetch(path, opts);
  } catch (e) {
    throw { type: "network", message: `${method} ${path}: ${e.message}` };
  }
  const data = await resp.json().catch(() => null);
  if (!resp.ok) {
    throw (data && data.error) || { type: "http_" + resp.status, message: `${method} ${path}: ${resp.status}` };
  }
  return data;
}

function when(iso) {
  if (!iso) return "";
  const t = new Date(iso);
  const s = Math.round((t - Date.now()) / 1000);
  const rel = Math.abs(s) < 120 ? `${Math.abs(s)}s` : `${Math.round(Math.abs(s) / 60)}m`;
  return `${t.toLocaleString()} (${s >= 0 ? "in " + rel : rel + " ago"})`;
}

const short = (id) => (id || "").slice(0, 12);

async function route() {
  closeStream();
  const m = location.hash.match(/^#\/box\/([^/]+)$/);
  if (m) return showBox(decodeURIComponent(m[1]));
  if (location.hash === "#/pools") return showPools();
  return showList();
}

async function showList() {
  const main = document.getElementById("main");
  inspector.box = null;
  let data;
  try {
    data = await api("GET", "/api/boxes");
  } catch (e) {
    showError(e);
    main.replaceChildren(el("p", { class: "muted" }, "The boxes could not be listed."));
    return;
  }
  for (const te of data.errors) showError({ type: "vendor " + te.target, message: te.message });
  const boxes = data.boxes;
  const hasPool = boxes.some((b) => b.pool);
  const hasSuspended = boxes.some((b) => "suspended" in b);
  const hasEgress = boxes.some((b) => b.egress);
  const rows = boxes.map((b) =>
    el("tr", { "data-box": b.id },
      el("td", {}, el("a", { href: "#/box/" + encodeURIComponent(b.id), class: "box-link mono" }, short(b.id))),
      el("td", {}, b.target),
      el("td", { class: "state" }, el("span", { class: "tag" }, b.state)),
      el("td", {}, b.harness || ""),
      el("td", { class: "mono" }, b.runTag),
      el("td", {}, when(b.deadline)),
      hasPool ? el("td", {}, b.pool || "") : null,
      hasSuspended ? el("td", {}, b.suspended ? "suspended" : "") : null,
      hasEgress ? el("td", { class: "egress mono" }, b.egress || "") : null,
      el("td", { class: "mono" }, b.liveRun ? "live " + b.liveRun : "")));
  main.replaceChildren(
    el("h1", {}, `Boxes (${boxes.length})`),
    boxes.length === 0 ? el("p", { id: "no-boxes", class: "muted" }, "The state knows no box: `boxctl up` makes one.") :
      el("table", { id: "boxes" },
        el("thead", {}, el("tr", {}, el("th", {}, "box"), el("th", {}, "vendor"), el("th", {}, "state"), el("th", {}, "harness"),
          el("th", {}, "run tag"), el("th", {}, "deadline"), hasPool ? el("th", {}, "pool") : null,
          hasSuspended ? el("th", {}, "suspended") : null, hasEgress ? el("th", {}, "egress") : null, el("th", {}, "turn"))),
        el("tbody", {}, rows)));
}

async function showBox(id) {
  const main = document.getElementById("main");
  inspector.box = id;
  let box;
  try {
    box = await api("GET", "/api/boxes/" + encodeURIComponent(id));
  } catch (e) {
    showError(e);
    main.replaceChildren(el("p", { class: "muted" }, "This box cannot be shown."), el("a", { href: "#/" }, "all boxes"));
    return;
  }
  const base = "/api/boxes/" + encodeURIComponent(id);
  const facts = [["vendor", box.target], ["state", box.state], ["harness", box.harness], ["run tag", box.runTag],
    ["deadline", when(box.deadline)], ["image", box.image]];
  if (box.pool) facts.push(["pool", box.pool]);
  if ("suspended" in box) facts.push(["suspended", box.suspended ? "yes" : "no"]);
  if (box.egress) facts.push(["egress", box.egress]);
  main.replaceChildren(
    el("h1", { id: "box-title" }, "Box ", el("span", { class: "mono" }, short(id)), " ", el("span", { class: "tag" }, box.state)),
    el("div", { class: "grid" },
      el("div", {},
        el("div", { class: "card" },
          el("h2", {}, "Turn"),
          el("textarea", { id: "prompt", placeholder: "Prompt for the agent" }),
          el("p", {},
            el("button", { id: "send", class: "primary", onclick: () => send(base) }, "Send turn"), " ",
            el("button", { id: "cancel", disabled: true, onclick: () => cancel(base) }, "Cancel")),
          el("div", { id: "turn-head", class: "muted" }),
          el("div", { id: "turn-status", class: "muted" }),
          el("div", { id: "asks" }),
          el("div", { id: "turn-text" }),
          el("div", { id: "turn-tools" })),
        el("div", { class: "card" }, el("h2", {}, "Trace"), el("div", { id: "trace", class: "muted" }, "Pick a run's trace."))),
      el("div", {},
        el("div", { class: "card" }, el("h2", {}, "Box"),
          el("table", {}, el("tbody", {}, facts.map(([k, v]) => el("tr", {}, el("th", {}, k), el("td", { class: "mono" }, v || "")))))),
        el("div", { class: "card" }, el("h2", {}, "Runs"), el("ul", { id: "runs", class: "runs" })),
        el("div", { class: "card" }, el("h2", {}, "Lifecycle"), el("table", { id: "events" })),
        el("div", { class: "card" }, el("h2", {}, "Bridge log"),
          el("button", { id: "load-logs", onclick: () => loadLogs(base) }, "Show log"),
          el("pre", { id: "log-stdout", hidden: true }), el("pre", { id: "log-stderr", hidden: true })),
        el("div", { class: "card" }, el("h2", {}, "Suspend"),
          el("p", { class: "muted" }, "A suspended box keeps its workspace and sessions; a resume starts it with a new bearer."),
          el("button", { id: "suspend", disabled: box.state === "suspended", onclick: () => lifecycle(base, id, "suspend") }, "Suspend box"), " ",
          el("button", { id: "resume", disabled: box.state !== "suspended", onclick: () => lifecycle(base, id, "resume") }, "Resume box")),
        box.state === "lost" ? el("div", { class: "card" }, el("h2", {}, "Lost"),
          el("p", { class: "muted" }, "The vendor no longer has this box. Its sessions can continue on a new box, each with its history from the replica."),
          el("button", { id: "replace", class: "primary", onclick: () => replaceBox(base, id) }, "Continue on a new box")) : null,
        el("div", { class: "card" }, el("h2", {}, "Destroy"),
          el("button", { id: "destroy", class: "danger", onclick: () => { document.getElementById("destroy-confirm").hidden = false; } }, "Destroy box…"), " ",
          el("button", { id: "destroy-confirm", class: "danger", hidden: true, onclick: () => destroy(base, id) }, "Yes, destroy it")))));
  await refresh(base);
  if (box.liveRun) stream(base, box.liveRun, false);
}

async function refresh(base) {
  try {
    const [runs, events] = await Promise.all([api("GET", base + "/runs"), api("GET", base + "/events")]);
    document.getElementById("runs").replaceChildren(...runs.map((r) => el("li", { "data-run": r.runId },
      el("span", { class: "mono" }, r.runId), " ", el("span", { class: "tag" }, r.live ? "live" : (r.outcome || "?")), " ",
      el("button", { class: "replay", onclick: () => stream(base, r.runId, !r.live) }, r.live ? "follow" : "replay"), " ",
      el("button", { class: "show-trace", onclick: () => showTrace(base, r.runId) }, "trace"))));
    document.getElementById("events").replaceChildren(...events.map((e) => el("tr", {},
      el("td", { class: "mono" }, new Date(e.time).toLocaleTimeString()), el("td", {}, e.type),
      el("td", {}, [e.reason, e.runId, e.detail].filter(Boolean).join(" · ")))));
  } catch (e) {
    showError(e);
  }
}

function closeStream() {
  if (inspector.stream) inspector.stream.close();
  inspector.stream = null;
}

// stream shows a run's events: replayed from the bridge's store, then live.
function stream(base, run, replay) {
  closeStream();
  const text = document.getElementById("turn-text");
  const tools = document.getElementById("turn-tools");
  const status = document.getElementById("turn-status");
  const asks = document.getElementById("asks");
  text.textContent = "";
  tools.replaceChildren();
  asks.replaceChildren();
  document.getElementById("turn-head").textContent = (replay ? "replay of run " : "run ") + run;
  status.textContent = "connecting…";
  delete status.dataset.ended;
  document.getElementById("cancel").disabled = replay;
  const es = new EventSource(base + "/runs/" + encodeURIComponent(run) + "/events");
  inspector.stream = es;
  const seenTools = new Map();
  es.addEventListener("event", (m) => {
    const ev = JSON.parse(m.data);
    if (!inspector.firstEventAt) inspector.firstEventAt = performance.now();
    if (ev.delta) text.append(ev.delta);
    if (ev.part && ev.part.type === "tool") {
      const line = `tool ${ev.part.tool || ""}: ${ev.part.state ? ev.part.state.status : ""}`;
      const key = ev.part.id || ev.part.callID || line;
      if (!seenTools.has(key)) { seenTools.set(key, el("div", { class: "tool" })); tools.append(seenTools.get(key)); }
      seenTools.get(key).textContent = line;
    }
    if (ev.type === "interaction" && ev.interaction) ask(base, run, ev.interaction, asks);
    if (ev.status) status.textContent = ev.status + (ev.detail ? ": " + ev.detail : "");
    if (ev.type === "result") {
      if (!text.textContent && ev.finalText) text.textContent = ev.finalText;
      status.textContent = "done" + (ev.finishReason ? " (" + ev.finishReason + ")" : "");
    }
    if (ev.usage) document.getElementById("turn-head").textContent =
      `run ${run} · ${ev.usage.inputTokens} in / ${ev.usage.outputTokens} out tokens` + (ev.providerModels ? " · " + ev.providerModels.join(", ") : "");
  });
  es.addEventListener("end", () => {
    closeStream();
    if (status.textContent === "connecting…") status.textContent = "ended";
    status.dataset.ended = "true";
    document.getElementById("cancel").disabled = true;
    refresh(base);
  });
  es.addEventListener("failure", (m) => {
    closeStream();
    showError(JSON.parse(m.data).error);
    status.textContent = "failed";
    document.getElementById("cancel").disabled = true;
  });
  es.onerror = () => {
    if (es.readyState === EventSource.CLOSED) {
      closeStream();
      showError({ type: "stream", message: "the event stream of run " + run + " closed" });
    }
  };
  inspector.run = run;
}

function ask(base, run, req, into) {
  const id = req.id;
  if (into.querySelector(`[data-ask="${CSS.escape(id)}"]`)) return;
  const sub = req.subject || {};
  const input = sub.input && typeof sub.input === "object" ? sub.input : null;
  const what = sub.command || (input && input.command) || sub.path || sub.uri ||
    (input ? JSON.stringify(input) : "");
  const box = el("div", { class: "ask", "data-ask": id },
    el("strong", {}, req.title || req.kind), sub.toolName ? el("div", { class: "muted" }, "tool " + sub.toolName) : null,
    what ? el("div", { class: "mono ask-subject" }, what) : null,
    req.body ? el("div", {}, req.body) : null);
  const answer = async (decision) => {
    box.querySelectorAll("button").forEach((b) => { b.disabled = true; });
    try {
      const r = await api("POST", `${base}/runs/${encodeURIComponent(run)}/interactions/${encodeURIComponent(id)}`, { decision });
      box.append(el("div", { class: "answered" }, `${decision}: ${r.status}`));
    } catch (e) {
      showError(e);
      box.querySelectorAll("button").forEach((b) => { b.disabled = false; });
    }
  };
  if (req.kind === "permission") {
    box.append(el("p", {},
      el("button", { class: "allow primary", onclick: () => answer("allow") }, "Allow once"), " ",
      el("button", { class: "deny danger", onclick: () => answer("deny") }, "Deny")));
  } else {
    box.append(el("p", { class: "muted" }, "The inspector answers permission requests only."));
  }
  into.append(box);
}

async function send(base) {
  const prompt = document.getElementById("prompt").value;
  const btn = document.getElementById("send");
  btn.disabled = true;
  inspector.sentAt = performance.now();
  inspector.firstEventAt = 0;
  try {
    const r = await api("POST", base + "/turns", { prompt });
    stream(base, r.runId, false);
    refresh(base);
  } catch (e) {
    showError(e);
  } finally {
    btn.disabled = false;
  }
}

async function cancel(base) {
  if (!inspector.run) return;
  try {
    const r = await api("POST", `${base}/runs/${encodeURIComponent(inspector.run)}/cancel`);
    notice("run " + inspector.run + ": " + r.status);
  } catch (e) {
    showError(e);
  }
}

async function loadLogs(base) {
  try {
    const l = await api("GET", base + "/logs");
    const out = document.getElementById("log-stdout"), err = document.getElementById("log-stderr");
    out.textContent = l.stdout || "(no output)";
    err.textContent = l.stderr || "(nothing on stderr)";
    out.hidden = err.hidden = false;
  } catch (e) {
    showError(e);
  }
}

// showTrace shows a run's spans; spans reach Jaeger in batches, so an
// empty trace is asked for again a few times.
async function showTrace(base, run, tries = 20) {
  const into = document.getElementById("trace");
  inspector.traceRun = run;
  try {
    const t = await api("GET", `${base}/runs/${encodeURIComponent(run)}/trace`);
    if (inspector.traceRun !== run) return;
    if (!t.tracing) { into.textContent = "Tracing is off: start boxctl ui with OTEL_EXPORTER_OTLP_ENDPOINT and --jaeger-url."; return; }
    if (!t.spans.length) {
      into.textContent = "No trace of run " + run + " yet" + (tries > 1 ? "; asking again…" : ".");
      if (tries > 1) setTimeout(() => showTrace(base, run, tries - 1), 1000);
      return;
    }
    const end = Math.max(...t.spans.map((s) => s.startMs + s.durationMs)) || 1;
    into.replaceChildren(
      t.url ? el("p", {}, el("a", { href: t.url, target: "_blank", rel: "noopener" }, "trace " + t.traceId)) : null,
      el("table", { id: "spans" }, t.spans.map((s) => el("tr", {},
        el("td", { style: `padding-left:${8 + 12 * s.depth}px` }, s.name), el("td", { class: "muted" }, s.service),
        el("td", { class: "mono" }, s.durationMs.toFixed(1) + " ms"),
        el("td", { style: "width:40%" }, el("div", { class: s.error ? "bar err" : "bar",
          style: `margin-left:${(100 * s.startMs / end).toFixed(2)}%;width:${(100 * s.durationMs / end).toFixed(2)}%` }))))));
  } catch (e) {
    showError(e);
  }
}

async function destroy(base, id) {
  document.getElementById("destroy-confirm").disabled = true;
  try {
    await api("POST", base + "/destroy");
    notice("destroyed box " + short(id));
    location.hash = "#/";
  } catch (e) {
    showError(e);
    document.getElementById("destroy-confirm").disabled = false;
  }
}

// lifecycle suspends or resumes the box (verb), then shows it again.
async function lifecycle(base, id, verb) {
  const btns = ["suspend", "resume"].map((b) => document.getElementById(b));
  btns.forEach((b) => { b.disabled = true; });
  notice(verb === "suspend" ? "suspending box " + short(id) + "…" : "resuming box " + short(id) + "…");
  try {
    const r = await api("POST", base + "/" + verb);
    notice(r.state + " box " + short(id));
    if (inspector.box === id) await showBox(id);
  } catch (e) {
    notice("");
    showError(e);
    if (inspector.box === id) await showBox(id);
  }
}

// replaceBox continues the lost box's sessions on a new box, then shows
// the new box.
async function replaceBox(base, id) {
  const btn = document.getElementById("replace");
  btn.disabled = true;
  notice("continuing box " + short(id) + " on a new box…");
  try {
    const r = await api("POST", base + "/replace");
    const cut = r.interrupted.length ? ", " + r.interrupted.length + " interrupted turns to run again" : "";
    notice("box " + short(r.id) + " continues " + short(id) + ": " + r.sessions.length + " sessions" + cut);
    location.hash = "#/box/" + encodeURIComponent(r.id);
  } catch (e) {
    notice("");
    showError(e);
    btn.disabled = false;
  }
}

async function showPools() {
  const main = document.getElementById("main");
  inspector.box = null;
  let data;
  try {
    data = await api("GET", "/api/pools");
  } catch (e) {
    showError(e);
    main.replaceChildren(el("p", { class: "muted" }, "The pools could not be listed."));
    return;
  }
  for (const me of data.errors) showError({ type: "keeper " + me.source, message: me.message });
  const k = (p, f) => (p.keeper ? String(p.keeper[f]) : "–");
  const size = (p) => (p.keeper ? String(p.keeper.size) : p.vendorKept ? String(p.want) : "–");
  const keepers = (p) => (p.vendorKept ? `kept by ${p.target}` : p.keepers.join(", "));
  const rows = data.pools.map((p) => el("tr", { "data-pool": p.name },
    el("td", { class: "mono" }, p.name), el("td", { class: "ready" }, p.ready), el("td", {}, p.orphaned),
    el("td", { class: "mono keepers" }, keepers(p)),
    el("td", { class: "size" }, size(p)), el("td", {}, k(p, "booting")), el("td", {}, k(p, "waitingClaims")),
    el("td", { class: "claims" }, k(p, "claims")), el("td", { class: "hits" }, k(p, "hits")), el("td", {}, k(p, "misses")),
    el("td", {}, p.keeper ? (p.keeper.breakerOpen ? "boots paused" : "") : "")));
  main.replaceChildren(
    el("h1", {}, `Pools (${data.pools.length})`),
    el("p", { id: "pools-shown", class: "muted" }, data.shown),
    data.pools.length === 0 ? el("p", { id: "no-pools", class: "muted" }, "No pool: `boxctl pool` keeps one.") :
      el("table", { id: "pools" },
        el("thead", {}, el("tr", {}, ["pool", "ready", "orphaned", "keepers", "size", "booting", "waiting claims", "claims", "hits", "cold", ""].map((h) => el("th", {}, h)))),
        el("tbody", {}, rows)));
}

async function main() {
  try {
    const s = await api("GET", "/api/session");
    inspector.csrf = s.csrf;
    inspector.tracing = s.tracing;
  } catch (e) {
    showError(e);
    return;
  }
  window.addEventListener("hashchange", () => { clearErrors(); route(); });
  await route();
  inspector.loadedAt = performance.now();
}

main();
