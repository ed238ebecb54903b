// The toolshell page: polls the JSON API and redraws. Everything a server or script wrote is shown
// as text (never as HTML), with hidden characters made visible by the server's own rule. URLs are
// relative, so the page also works mounted under a prefix (`/ui/`).
//
// The token comes in the URL's fragment (`#token=…`, never sent to a server), is taken out of the
// address bar at once, kept in this tab's sessionStorage (which no other port's page can read, unlike
// a cookie) and sent as a header on every API request.
"use strict";

const TOKEN = takeToken();
const POLL_MS = 1500;
const STATS_MS = 10_000;  // statistics are re-read when the timeline changes, and at least this often
const TIMELINE_PAGE = 30;
const TIMELINE_MAX = 500;  // the API's own bound
const MARKS = { completed: "✓", failed: "✗", refused: "⊘", stopped_for_approval: "‖" };
const HIDDEN_CHARS = hiddenChars(document.querySelector('meta[name="toolshell-hidden"]').content);

function takeToken() {
  const given = new URLSearchParams(location.hash.slice(1)).get("token");
  if (given) history.replaceState(null, "", location.pathname + location.search);
  try {
    if (given) sessionStorage.setItem("toolshell-token", given);
    return given || sessionStorage.getItem("toolshell-token") || "";
  } catch {
    return given || "";  // storage turned off: the token lives in memory until the tab is reloaded
  }
}

// The characters toolshell.safe_text escapes, from the ranges the server put in the page ("0-8,b-1f,…"),
// minus tab and newline, which are layout here (as in safe_text.escape_lines).
function hiddenChars(ranges) {
  const parts = ranges.split(",").map((range) => {
    const [first, last] = range.split("-");
    return `\\u{${first}}-\\u{${last}}`;
  });
  return new RegExp(`(?![\\t\\n])[${parts.join("")}]`, "gu");
}

// Spelled the way Python spells them: \x1b, \u202e, \U000e0041.
function spell(c) {
  const code = c.codePointAt(0);
  if (code < 0x100) return "\\x" + code.toString(16).padStart(2, "0");
  if (code < 0x10000) return "\\u" + code.toString(16).padStart(4, "0");
  return "\\U" + code.toString(16).padStart(8, "0");
}

function safe(value) {
  const text = typeof value === "string" ? value : JSON.stringify(value);
  return (text ?? "").replace(HIDDEN_CHARS, spell);
}

function el(tag, props = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(props)) {
    if (key === "dataset") Object.assign(node.dataset, value);
    else if (key === "onclick") node.addEventListener("click", value);
    else node.setAttribute(key, value);
  }
  return fill(node, ...children);
}

// Replace a node's children; strings go in as escaped text, never as HTML.
function fill(node, ...children) {
  node.replaceChildren(...children.map((child) => (child instanceof Node ? child : safe(child))));
  return node;
}

async function api(path, options = {}) {
  const headers = { "X-Toolshell-Token": TOKEN };
  if (options.body !== undefined) headers["Content-Type"] = "application/json";
  const response = await fetch(path, { ...options, headers, credentials: "omit" });
  const data = await response.json().catch(() => null);  // a 404 from a router or proxy is not JSON
  if (!response.ok) {
    const err = new Error(data?.error?.message || `${response.status} ${response.statusText}`.trim());
    err.status = response.status;
    throw err;
  }
  return data;
}

const post = (path, body) => api(path, { method: "POST", body: JSON.stringify(body) });

function when(value) {
  const date = typeof value === "number" ? new Date(value * 1000) : new Date(value);
  return date.toLocaleString();
}

function spent(ms) {  // a statistic: null when no call of the tool ran, shown as "-" (never "0.0 ms")
  return ms === null ? "-" : took(ms);
}

function took(ms) {
  if (ms === null || ms === undefined) return "running";
  if (typeof ms !== "number") return "-";
  if (ms < 10) return `${ms.toFixed(1)} ms`;
  return ms < 1000 ? `${Math.round(ms)} ms` : `${(ms / 1000).toFixed(1)} s`;
}

function show(id, empty) {
  document.getElementById(id + "-empty").hidden = !empty;
  const table = document.getElementById(id + "-table");
  if (table) table.hidden = empty;
}

function renderApprovals(pending) {
  const count = pending.length ? `(${pending.length})` : "";
  document.getElementById("approvals-count").textContent = count;
  document.getElementById("nav-approvals-count").textContent = count;
  show("approvals", pending.length === 0);
  const cards = pending.map((r) => {
    const answer = (choice) => async (event) => {
      event.target.closest(".card").querySelectorAll("button").forEach((b) => (b.disabled = true));
      try {
        await post(`api/approvals/${encodeURIComponent(r.id)}`, { answer: choice });
        setStatus(`answered ${r.id}: ${choice}`);
      } catch (err) {
        setStatus(err.message, true);
      }
      refresh();
    };
    return el("div", { class: "card", dataset: { requestId: r.id } },
      el("div", {}, el("code", {}, r.tool), " ", el("span", { class: "risk" }, `${r.risk} (${r.why || "policy"})`)),
      el("pre", {}, JSON.stringify(r.input, null, 2)),
      r.message ? el("div", {}, r.message) : "",
      el("div", { class: "meta" }, `${r.id} · session ${r.session_id} · worker ${(r.worker || "-").slice(0, 8)} · ${when(r.created)}`),
      el("div", {},
        el("button", { class: "once", onclick: answer("once") }, "once"),
        el("button", { class: "always", onclick: answer("always") }, "always"),
        el("button", { class: "deny", onclick: answer("deny") }, "deny")));
  });
  document.getElementById("approvals-list").replaceChildren(...cards);
}

function renderGrants(grants) {
  show("grants", grants.length === 0);
  const rows = grants.map((g) => el("tr", {},
    el("td", {}, g.kind), el("td", {}, el("code", {}, g.tool)),
    el("td", {}, g.input === null ? "any input" : el("code", {}, JSON.stringify(g.input))),
    el("td", {}, when(g.created)),
    el("td", {}, el("button", { class: "revoke", onclick: async () => {
      try { await post("api/grants/revoke", { tool: g.tool }); } catch (err) { setStatus(err.message, true); }
      refresh();
    } }, "revoke"))));
  document.querySelector("#grants-table tbody").replaceChildren(...rows);
}

function renderTimeline(calls) {
  show("timeline", calls.length === 0);
  document.getElementById("timeline-more").hidden = calls.length < timelineLimit || timelineLimit >= TIMELINE_MAX;
  const rows = [];
  for (const c of calls) {
    const lost = c.ended_by === "worker_lost";
    const silent = c.exit_code === null && c.worker && workersAlive[c.worker] === false;
    const outcome = lost ? `lost: its worker died (exit ${c.exit_code})`
      : silent ? "running? its worker stopped answering" : c.exit_code === null ? "running" : `exit ${c.exit_code}`;
    rows.push(el("tr", { class: lost || silent ? "worker-lost" : "" }, el("td", {}, when(c.started_at)),
      el("td", {}, el("code", { title: c.worker || "" }, (c.worker || "-").slice(0, 8))),
      el("td", {}, el("code", {}, c.session_id)),
      el("td", {}, c.address ? `${c.source} from ${c.address}` : c.source),
      el("td", {}, el("code", {}, c.script_preview)), el("td", {}, outcome),
      el("td", { class: "took" }, took(c.duration_ms))));
    for (const n of c.calls) {
      rows.push(el("tr", { class: "nested-call" }, el("td", {}), el("td", {}), el("td", {}),
        el("td", {}, "tool.nested_call"),
        el("td", { class: "nested" }, el("code", {}, `${n.command} ${n.input_preview}`)),
        el("td", { class: `outcome-${n.outcome}` }, `${MARKS[n.outcome] || "?"} ${n.outcome}${n.error_code && n.outcome !== "stopped_for_approval" ? " " + n.error_code : ""}`),
        el("td", { class: "took" }, took(n.duration_ms))));
    }
  }
  document.querySelector("#timeline-table tbody").replaceChildren(...rows);
}

function updateServers(servers) {
  const select = document.getElementById("server-filter");
  const known = new Set([...select.options].map((o) => o.value));
  for (const s of servers) {
    if (!known.has(s.name)) {
      select.append(el("option", { value: s.name }, s.name));
      known.add(s.name);
    }
  }
}

function updateSessions(calls) {
  const select = document.getElementById("session-filter");
  const known = new Set([...select.options].map((o) => o.value));
  for (const c of calls) {
    if (!known.has(c.session_id)) {
      select.append(el("option", { value: c.session_id }, c.session_id));
      known.add(c.session_id);
    }
  }
}

function renderServers(servers) {
  const rows = [];
  for (const s of servers) {
    rows.push(el("tr", {}, el("td", {}, s.name), el("td", {}, s.type), el("td", { class: `state-${s.state}` }, s.state),
      el("td", {}, s.protocol_version || "-"), el("td", {}, s.tool_count === null ? "-" : String(s.tool_count)),
      el("td", {}, s.last_error || "")));
    if (s.stderr_tail.length && s.state !== "ready") {
      rows.push(el("tr", {}, el("td", { colspan: "6" }, el("pre", {}, s.stderr_tail.slice(-10).join("\n")))));
    }
  }
  document.querySelector("#servers-table tbody").replaceChildren(...rows);
}

// One view per saved script, kept across redraws: a new run changes /api/scripts and redraws the
// list, which updates the text around a script's input box and result but never replaces them, so
// what was typed, the caret, and the last run's output stay.
const scriptViews = new Map();

function scriptView(name) {
  if (scriptViews.has(name)) return scriptViews.get(name);
  const view = {
    summary: el("div"),
    triggers: el("div", { class: "meta" }),
    runs: el("div", { class: "meta" }),
    input: el("input", { placeholder: "input JSON, e.g. {}", "aria-label": `input of ${name}` }),
    button: el("button", { class: "run" }, "run"),
    result: el("pre", { class: "result", hidden: "" }),
  };
  view.button.addEventListener("click", () => runScript(name, view));
  view.card = el("div", { class: "script", dataset: { script: name } },
    view.summary, view.triggers, view.runs, el("div", {}, view.input, " ", view.button), view.result);
  scriptViews.set(name, view);
  return view;
}

async function runScript(name, view) {
  const shown = (text) => { view.result.textContent = safe(text); view.result.hidden = false; };
  let body;
  try { body = view.input.value.trim() ? JSON.parse(view.input.value) : {}; }
  catch { shown("the input must be JSON, e.g. {\"repo\": \"acme/api\"}"); return; }
  view.button.disabled = true;
  shown("running…");
  try {
    shown(JSON.stringify(await post(`api/scripts/${encodeURIComponent(name)}/run`, body), null, 2));
  } catch (err) {
    shown(err.message);
  } finally {
    view.button.disabled = false;
  }
  refresh();
}

function renderScripts(scripts) {
  show("scripts", scripts.length === 0);
  const names = new Set(scripts.map((s) => s.name));
  for (const name of scriptViews.keys()) if (!names.has(name)) scriptViews.delete(name);
  const cards = scripts.map((s) => {
    const view = scriptView(s.name);
    const triggers = s.triggers.map((t) => `${t.name} (${[t.schedule, t.webhook ? "webhook" : ""].filter(Boolean).join(", ")})`);
    const runs = s.runs.map((r) => `${when(r.started_at)} ${r.ended_by === "worker_lost" ? "lost (its worker died)" : `exit ${r.exit_code ?? "running"}`} ${took(r.duration_ms)} on ${(r.worker || "-").slice(0, 8)}`);
    fill(view.summary, el("code", {}, s.name), " — ", s.description || "(no description)");
    fill(view.triggers, `triggers: ${triggers.join("; ") || "none"}`);
    fill(view.runs, `trigger runs: ${runs.join("; ") || "none yet"}`);
    return view.card;
  });
  const list = document.getElementById("scripts-list");
  const same = cards.length === list.children.length && cards.every((card, i) => list.children[i] === card);
  if (!same) list.replaceChildren(...cards);  // only when scripts come, go or change order
}

// GET /api/stats, or null where this toolshell has no such endpoint (404): the section stays hidden.
async function loadStats() {
  try {
    return await api("api/stats");
  } catch (err) {
    if (err.status === 404) return null;
    return { error: err.message };
  }
}

function renderStats(stats) {
  document.getElementById("stats").hidden = stats === null;
  document.getElementById("nav-stats").hidden = stats === null;
  if (stats === null) return;
  const rows = stats.rows || [];
  show("stats", rows.length === 0);
  const since = stats.error ? `unavailable: ${stats.error}` : stats.since == null ? "of every recorded call" : `since ${when(stats.since)}`;
  fill(document.getElementById("stats-since"), since);
  const errors = (counts) => Object.entries(counts || {}).map(([code, n]) => `${code} ${n}`).join(", ");
  const cells = rows.map((r) => el("tr", {},
    el("td", {}, r.server ?? "-"), el("td", {}, el("code", {}, r.tool)), el("td", { class: "num" }, String(r.calls)),
    el("td", { class: errors(r.errors) ? "outcome-failed" : "" }, errors(r.errors) || "none"),
    el("td", { class: "num" }, String(r.approvals_asked)),
    el("td", { class: "took" }, spent(r.p50_ms)), el("td", { class: "took" }, spent(r.p95_ms)),
    el("td", { class: "took" }, spent(r.max_ms))));
  document.querySelector("#stats-table tbody").replaceChildren(...cells);
  const quotas = stats.quotas;  // present only where [[quotas]] are configured
  document.getElementById("quota-table").hidden = !Array.isArray(quotas);
  if (!Array.isArray(quotas)) return;
  const used = quotas.map((q) => el("tr", {},
    el("td", {}, q.caller), el("td", { class: "num" }, String(q.calls)), el("td", { class: "num" }, String(q.result_bytes))));
  document.querySelector("#quota-table tbody").replaceChildren(...used);
}

// The last action's outcome (an answer, a run, an error), kept beside the "updated" time.
function setStatus(text, bad = false) {
  const notice = document.getElementById("notice");
  notice.textContent = safe(text);
  notice.classList.toggle("lost", bad);
}

// Redraw a section only when its data changed, so typed input and shown results survive polling.
const drawn = {};
function draw(key, data, render) {
  const text = JSON.stringify(data);
  if (drawn[key] === text) return false;
  drawn[key] = text;
  render(data);
  return true;
}

let timelineLimit = TIMELINE_PAGE;
let workersAlive = {};  // worker id → alive, from /api/workers: a running call of a silent worker says so
let statsRead = 0;

let refreshing = false;
async function refresh() {
  if (refreshing) return;
  refreshing = true;
  try {
    const query = new URLSearchParams({ limit: String(timelineLimit) });
    for (const [name, id] of [["session", "session-filter"], ["outcome", "outcome-filter"], ["server", "server-filter"]]) {
      const value = document.getElementById(id).value;
      if (value) query.set(name, value);
    }
    const [pending, grants, calls, servers, scripts, workers] = await Promise.all([
      api("api/approvals"), api("api/grants"), api(`api/timeline?${query}`), api("api/servers"), api("api/scripts"),
      api("api/workers").catch(() => []),
    ]);
    workersAlive = Object.fromEntries(workers.map((w) => [w.id, w.alive]));
    updateServers(servers);
    draw("approvals", pending, renderApprovals);
    draw("grants", grants, renderGrants);
    updateSessions(calls);
    const newCalls = draw("timeline", calls, renderTimeline);
    draw("servers", servers, renderServers);
    draw("scripts", scripts, renderScripts);
    if (newCalls || Date.now() - statsRead > STATS_MS) {
      statsRead = Date.now();
      draw("stats", await loadStats(), renderStats);
    }
    const status = document.getElementById("status");
    status.textContent = `updated ${new Date().toLocaleTimeString()}`;
    status.classList.remove("lost");
  } catch (err) {
    const status = document.getElementById("status");
    status.textContent = safe(`cannot reach toolshell web: ${err.message}`);
    status.classList.add("lost");
  } finally {
    refreshing = false;
  }
}

for (const id of ["session-filter", "outcome-filter", "server-filter"]) {
  document.getElementById(id).addEventListener("change", refresh);
}
document.getElementById("timeline-more").addEventListener("click", () => {
  timelineLimit = Math.min(timelineLimit + TIMELINE_PAGE, TIMELINE_MAX);
  refresh();
});
refresh();
setInterval(refresh, POLL_MS);
