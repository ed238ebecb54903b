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
  for (const child of children) node.append(child instanceof Node ? child : safe(child));
  return node;
}

async function api(path, options = {}) {
  const headers = { "X-Toolshell-Token": TOKEN };
  if (options.body !== undefined) headers["Content-Type"] = "application/json";
  const response = await fetch(path, { ...options, headers, credentials: "omit" });
  const data = await response.json();
  if (!response.ok) throw new Error(data.error ? data.error.message : response.statusText);
  return data;
}

const post = (path, body) => api(path, { method: "POST", body: JSON.stringify(body) });

function when(value) {
  const date = typeof value === "number" ? new Date(value * 1000) : new Date(value);
  return date.toLocaleString();
}

function took(ms) {
  if (ms === null || ms === undefined) return "running";
  return ms < 1000 ? `${Math.round(ms)} ms` : `${(ms / 1000).toFixed(1)} s`;
}

function show(id, empty) {
  document.getElementById(id + "-empty").hidden = !empty;
  const table = document.getElementById(id + "-table");
  if (table) table.hidden = empty;
}

function renderApprovals(pending) {
  document.getElementById("approvals-count").textContent = pending.length ? `(${pending.length})` : "";
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
      el("div", { class: "meta" }, `${r.id} · session ${r.session_id} · ${when(r.created)}`),
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
  const rows = [];
  for (const c of calls) {
    const outcome = c.exit_code === null ? "running" : `exit ${c.exit_code}`;
    rows.push(el("tr", {}, el("td", {}, when(c.started_at)), el("td", {}, el("code", {}, c.session_id)),
      el("td", {}, c.source), el("td", {}, el("code", {}, c.script_preview)), el("td", {}, outcome),
      el("td", { class: "took" }, took(c.duration_ms))));
    for (const n of c.calls) {
      rows.push(el("tr", { class: "nested-call" }, el("td", {}), el("td", {}), el("td", {}, "tool.nested_call"),
        el("td", { class: "nested" }, el("code", {}, `${n.command} ${n.input_preview}`)),
        el("td", { class: `outcome-${n.outcome}` }, `${MARKS[n.outcome] || "?"} ${n.outcome}${n.error_code && n.outcome !== "stopped_for_approval" ? " " + n.error_code : ""}`),
        el("td", { class: "took" }, took(n.duration_ms))));
    }
  }
  document.querySelector("#timeline-table tbody").replaceChildren(...rows);
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

function renderScripts(scripts) {
  show("scripts", scripts.length === 0);
  const items = scripts.map((s) => {
    const input = el("input", { placeholder: "input JSON, e.g. {}", "aria-label": `input of ${s.name}` });
    const result = el("pre", { class: "result", hidden: "" });
    const run = async () => {
      let body;
      try { body = input.value.trim() ? JSON.parse(input.value) : {}; }
      catch { setStatus("the input must be JSON, e.g. {\"repo\": \"acme/api\"}", true); return; }
      try {
        const outcome = await post(`api/scripts/${encodeURIComponent(s.name)}/run`, body);
        result.textContent = safe(JSON.stringify(outcome, null, 2));
      } catch (err) { result.textContent = safe(err.message); }
      result.hidden = false;
      refresh();
    };
    const triggers = s.triggers.map((t) => `${t.name} (${[t.schedule, t.webhook ? "webhook" : ""].filter(Boolean).join(", ")})`);
    const runs = s.runs.map((r) => `${when(r.started_at)} exit ${r.exit_code ?? "running"} ${took(r.duration_ms)}`);
    return el("div", { class: "script", dataset: { script: s.name } },
      el("div", {}, el("code", {}, s.name), " — ", s.description || "(no description)"),
      el("div", { class: "meta" }, `triggers: ${triggers.join("; ") || "none"}`),
      el("div", { class: "meta" }, `trigger runs: ${runs.join("; ") || "none yet"}`),
      el("div", {}, input, " ", el("button", { class: "run", onclick: run }, "run")), result);
  });
  document.getElementById("scripts-list").replaceChildren(...items);
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
  if (drawn[key] === text) return;
  drawn[key] = text;
  render(data);
}

let refreshing = false;
async function refresh() {
  if (refreshing) return;
  refreshing = true;
  try {
    const session = document.getElementById("session-filter").value;
    const query = new URLSearchParams({ limit: "30", ...(session ? { session } : {}) });
    const [pending, grants, calls, servers, scripts] = await Promise.all([
      api("api/approvals"), api("api/grants"), api(`api/timeline?${query}`), api("api/servers"), api("api/scripts"),
    ]);
    draw("approvals", pending, renderApprovals);
    draw("grants", grants, renderGrants);
    updateSessions(calls);
    draw("timeline", calls, renderTimeline);
    draw("servers", servers, renderServers);
    draw("scripts", scripts, renderScripts);
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

document.getElementById("session-filter").addEventListener("change", refresh);
refresh();
setInterval(refresh, POLL_MS);
