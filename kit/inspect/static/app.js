// The Glovebox inspector. Everything the box sends is data: it is shown
// with textContent, never parsed as HTML. index.html loads format.js,
// terminal.js, session.js, xterm.js, shell.js and box.js before this file, as classic scripts
// sharing the page's scope, and this one last: it starts the page.
"use strict";

const api = "api/";
const rowH = 18; // px: one line of the terminal and of the raw events
const maxLines = 200000; // lines a session's terminal keeps; older ones go
const maxRaw = 200000; // raw events a session keeps
const maxViews = 8; // sessions whose output the page keeps
const state = { selected: null, stream: null, live: [], history: [], views: new Map(), tab: "output", env: null, confirming: null, aborting: new Set(), terminals: false };

function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v == null) continue;
    if (k === "class") e.className = v;
    else if (k.startsWith("on")) e.addEventListener(k.slice(2), v);
    else e.setAttribute(k, v);
  }
  for (const c of children) if (c != null && c !== false) e.append(c);
  return e;
}

const $ = (id) => document.getElementById(id);

function status(text) {
  $("status").textContent = text;
}

async function call(path, opts = {}) {
  const headers = Object.assign({}, opts.headers || {});
  if (opts.method && opts.method !== "GET") headers["X-Glovebox-Inspect"] = "1";
  return fetch(api + path, { credentials: "same-origin", cache: "no-store", ...opts, headers });
}

// login exchanges a key or token for the inspector's cookie.
async function login(token) {
  const r = await call("login", { method: "POST", headers: { Authorization: "Bearer " + token } });
  return r.ok;
}

async function start() {
  // A token in the fragment never reached a server; drop it from the
  // address bar and history before anything else.
  const frag = new URLSearchParams(location.hash.slice(1));
  const token = frag.get("token");
  if (location.hash) history.replaceState(null, "", location.pathname);
  if (token && !(await login(token))) {
    status("the token was refused: it must be the key or carry the inspect scope");
  }
  const r = await call("sessions");
  if (r.status === 401) return showLogin();
  if (!r.ok) return status("sessions: HTTP " + r.status);
  showMain();
  const body = await r.json();
  state.live = body.sessions || [];
  state.terminals = body.terminals === true;
  await loadHistory();
  render();
}

function showLogin() {
  $("main").hidden = true;
  const form = $("login");
  form.hidden = false;
  status("not signed in");
  form.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    const input = $("token");
    const ok = await login(input.value.trim());
    input.value = "";
    if (!ok) return status("refused: use the key or a token with the inspect scope");
    form.hidden = true;
    start();
  }, { once: true });
}

let term, raw;
function showMain() {
  $("main").hidden = false;
  status("live");
  term = new VList($("terminal"), (v, i) => termRow(v.lines[i]), (v) => v.lines.length);
  raw = new VList($("events"), (v, i) => rawRow(v.raw[i]), (v) => v.raw.length);
  for (const b of document.querySelectorAll("#tabs button")) b.addEventListener("click", () => showTab(b.dataset.tab));
  $("open-shell").addEventListener("click", () => { if (state.selected) openShell(state.selected); });
  loadEnvironment();
  loadSnapshots();
  setInterval(refresh, 2000);
  setInterval(loadSnapshots, 10000);
}

function showTab(name) {
  state.tab = name;
  for (const b of document.querySelectorAll("#tabs button")) b.classList.toggle("on", b.dataset.tab === name);
  for (const t of document.querySelectorAll(".tab")) t.hidden = t.id !== "tab-" + name;
  if (name === "output") term.draw();
  if (name === "raw") raw.draw();
  if (name === "egress") loadEgress();
}

async function refresh() {
  try {
    const r = await call("sessions");
    if (r.status === 401) return status("signed out: reload the page with a token");
    if (!r.ok) return;
    const body = await r.json();
    const live = body.sessions || [];
    state.terminals = body.terminals === true;
    for (const s of live) s.prompts ||= [];
    const gone = state.live.some((s) => !live.some((l) => l.id === s.id));
    state.live = live;
    if (gone || state.history.length === 0) await loadHistory();
    render();
    if (state.selected && state.tab === "egress") loadEgress();
  } catch (e) {
    status("box unreachable");
  }
}

async function loadHistory() {
  const r = await call("history");
  if (!r.ok) return;
  state.history = (await r.json()).sessions || [];
  for (const s of state.history) s.prompts ||= [];
}

// current returns the selected session: live, or from the history.
function current() {
  const id = state.selected;
  if (!id) return null;
  const live = state.live.find((s) => s.id === id);
  if (live) return { live: true, ...live };
  const h = state.history.find((s) => s.id === id);
  return h ? { live: false, ...h } : { live: false, id, prompts: [], missing: true };
}

function render() {
  const list = $("sessions");
  list.replaceChildren();
  if (state.live.length === 0) list.append(el("li", { class: "meta empty" }, "no live sessions"));
  for (const s of state.live) {
    const running = s.prompts.filter((p) => p.state === "running").length;
    list.append(el("li", { "data-session": s.id, class: s.id === state.selected ? "selected" : null, onclick: () => select(s.id) },
      el("div", { class: "id" }, s.id),
      el("div", { class: "meta" }, `${s.owner} · since ${fmtTime(s.started)} · ${linkState(s)} · ${s.prompts.length} prompt(s)${running ? " · running" : ""}`)));
  }
  const hist = $("history");
  hist.replaceChildren();
  if (state.history.length === 0) hist.append(el("li", { class: "meta empty" }, "none yet"));
  for (const s of state.history) {
    const failed = s.prompts.some((p) => p.state === "error" || p.state === "ended");
    hist.append(el("li", { "data-session": s.id, class: s.id === state.selected ? "selected" : null, onclick: () => select(s.id) },
      el("div", { class: "id" }, s.id, failed ? el("span", { class: "dot bad", title: "a prompt failed" }) : null),
      el("div", { class: "meta" }, `${s.owner} · ${fmtTime(s.started)} for ${fmtDur(dur(s.started, s.ended))} · ${s.prompts.length} prompt(s) · ${s.cause}`)));
  }
  renderTotals();
  renderBoxTimeline();
  renderSession();
}

// view returns what the page keeps of a session's frames.
function view(id) {
  let v = state.views.get(id);
  if (!v) {
    v = { id, lines: [], raw: [], seen: 0, outputs: new Map(), slots: new Map(), marks: [], egress: [], egressSeq: 0, sgr: newSGR(), cur: null, pend: "" };
    state.views.set(id, v);
    if (state.views.size > maxViews) {
      for (const k of state.views.keys()) {
        if (k !== id && k !== state.selected) { state.views.delete(k); break; }
      }
    }
  }
  return v;
}

function select(id) {
  if (state.stream) state.stream.close();
  state.stream = null;
  state.selected = id;
  status("live");
  const v = view(id);
  $("slots").replaceChildren(...v.slots.values());
  term.show(v);
  raw.show(v);
  render();
  if (state.live.some((s) => s.id === id)) follow(id);
  if (state.tab === "egress") loadEgress();
}

// follow reads the session's frames; the box drops an observer that falls
// behind, and the page then follows again from the frames the box kept.
function follow(id) {
  const es = new EventSource(api + "sessions/" + encodeURIComponent(id) + "/events");
  state.stream = es;
  const v = view(id);
  es.addEventListener("frame", (ev) => {
    const f = JSON.parse(ev.data);
    if (typeof f.seq === "number") {
      if (f.seq <= v.seen) return;
      if (v.seen && f.seq > v.seen + 1) {
        const gap = `frames ${v.seen + 1}–${f.seq - 1} went by while the page fell behind (the box keeps a session's latest frames only)`;
        v.raw.push({ seq: v.seen + 1, kind: "gap", text: gap });
        endLine(v);
        pushLine(v, [["… " + gap, "note"]], "gap");
      }
      v.seen = f.seq;
    }
    frame(v, f, ev.data);
  });
  es.addEventListener("end", (ev) => {
    es.close();
    if (ev.data === "dropped" && state.selected === id) {
      setTimeout(() => { if (state.selected === id) follow(id); }, 200);
    } else {
      status("session " + id.slice(0, 8) + "… ended");
      refresh();
    }
  });
  es.onerror = () => { if (es.readyState === EventSource.CLOSED) status("event stream closed"); };
}

function frame(v, f, text) {
  v.raw.push({ seq: f.seq, kind: f.type === "event" ? f.event_type : f.type, id: f.id, text });
  if (v.raw.length > maxRaw) v.raw.splice(0, v.raw.length - maxRaw * 0.9);
  const now = Date.now();
  switch (f.type) {
    case "event":
      if (f.event_type === "text_delta" && f.data && typeof f.data.text === "string") {
        promptHeader(v, f.id);
        write(v, f.data.text, f.data.stream === "stderr");
      } else if (f.event_type === "exit" && f.data) {
        promptHeader(v, f.id);
        endLine(v);
        const d = f.data;
        pushLine(v, [[`[exit ${d.code}${d.signal ? " " + d.signal : ""}${d.limit ? ", limit " + d.limit : ""}]`, "note"]], d.code ? "err" : "");
      } else if (f.event_type === "egress" && f.data) {
        v.marks.push({ t: now, kind: "egress", label: `${f.data.decision} ${f.data.host}:${f.data.port}` });
      }
      break;
    case "display_push":
      v.marks.push({ t: now, kind: "slot", label: `slot ${f.slot.renderer}` });
      showSlot(v, f.slot);
      break;
    case "display_clear":
      v.slots.get(f.slot_id)?.remove();
      v.slots.delete(f.slot_id);
      break;
    case "complete":
      endLine(v);
      for (const [name, ref] of Object.entries(f.outputs || {})) {
        v.outputs.set(f.id + "\0" + name, { name, ref, prompt: f.id });
        v.marks.push({ t: now, kind: "output", label: name });
      }
      if (v.id === state.selected) renderSession();
      break;
    case "error":
      promptHeader(v, f.id);
      endLine(v);
      pushLine(v, [[`[${f.id}] ${f.error.code}: ${f.error.message}`, "note"]], "err");
      break;
  }
  if (v.id === state.selected) {
    if (state.tab === "output") term.dirty();
    if (state.tab === "raw") raw.dirty();
  }
  soon();
}

// soon refreshes the session list once after a burst of frames, not once
// per frame.
let refreshTimer = null;
function soon() {
  if (refreshTimer) return;
  refreshTimer = setTimeout(() => {
    refreshTimer = null;
    refresh();
  }, 300);
}

start().catch((e) => status("inspector: " + e));
