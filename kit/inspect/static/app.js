// The Glovebox inspector. Everything the box sends is data: it is shown
// with textContent, never parsed as HTML.
"use strict";

const api = "api/";
const rowH = 18; // px: one line of the terminal and of the raw events
const maxLines = 200000; // lines a session's terminal keeps; older ones go
const maxRaw = 200000; // raw events a session keeps
const maxViews = 8; // sessions whose output the page keeps
const state = { selected: null, stream: null, live: [], history: [], views: new Map(), tab: "output", env: null, confirming: null, aborting: new Set() };

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
  if (opts.method === "POST") headers["X-Glovebox-Inspect"] = "1";
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
  state.live = (await r.json()).sessions || [];
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
  loadEnvironment();
  setInterval(refresh, 2000);
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
    const live = (await r.json()).sessions || [];
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

const fmtTime = (s) => (s ? new Date(s).toLocaleTimeString() : "");

function fmtDur(ms) {
  if (!(ms >= 0)) return "";
  if (ms < 1000) return Math.round(ms) + " ms";
  if (ms < 60000) return (ms / 1000).toFixed(1) + " s";
  const m = Math.floor(ms / 60000);
  return m < 60 ? `${m} min ${Math.round((ms % 60000) / 1000)} s` : `${Math.floor(m / 60)} h ${m % 60} min`;
}

function fmtBytes(n) {
  if (!n) return "0 B";
  const u = ["B", "KiB", "MiB", "GiB"];
  let i = 0;
  while (n >= 1024 && i < u.length - 1) { n /= 1024; i++; }
  return (i ? n.toFixed(1) : n) + " " + u[i];
}

const dur = (a, b) => (a && b ? new Date(b) - new Date(a) : a ? Date.now() - new Date(a) : NaN);

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
      el("div", { class: "meta" }, `${s.owner} · since ${fmtTime(s.started)} · ${s.connected ? "connected" : "detached"} · ${s.prompts.length} prompt(s)${running ? " · running" : ""}`)));
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

// renderBoxTimeline draws the box's latest sessions over time, one row
// each: live ones up to now, ended ones red when a prompt failed.
function renderBoxTimeline() {
  const now = Date.now();
  const rows = [
    ...state.live.map((s) => ({ id: s.id, a: new Date(s.started).getTime(), b: now, cls: "live" })),
    ...state.history.map((s) => ({ id: s.id, a: new Date(s.started).getTime(), b: new Date(s.ended).getTime(), cls: s.prompts.some((p) => p.state === "error" || p.state === "ended") ? "failed" : "ended" })),
  ].sort((x, y) => y.a - x.a).slice(0, 24).reverse();
  const box = $("box-timeline");
  if (!rows.length) return box.replaceChildren();
  const t0 = Math.min(...rows.map((r) => r.a));
  const span = Math.max(now - t0, 1000);
  const W = 300, H = rows.length * 6 + 2;
  const g = svg("svg", { viewBox: `0 0 ${W} ${H}`, preserveAspectRatio: "none", class: "sessions-time", role: "img", "aria-label": "sessions over time" });
  g.style.height = H + "px";
  rows.forEach((r, i) => {
    const x = ((r.a - t0) / span) * W;
    const bar = svg("rect", { x, y: i * 6 + 1, width: Math.max(2, ((r.b - r.a) / span) * W), height: 4, class: r.cls + (r.id === state.selected ? " selected" : ""), "data-session": r.id },
      svg("title", {}, `${r.id} · ${fmtDur(r.b - r.a)}`));
    bar.addEventListener("click", () => select(r.id));
    g.append(bar);
  });
  box.replaceChildren(el("div", { class: "meta" }, "sessions over time"), g,
    el("div", { class: "axis-labels meta" }, el("span", {}, fmtTime(t0)), el("span", {}, "now")));
}

function renderSession() {
  const s = current();
  if (!s) return;
  $("session-title").textContent = `Session ${s.id}${s.live ? "" : " (ended)"}`;
  $("session-meta").textContent = s.live
    ? `${s.owner} · since ${fmtTime(s.started)} · ${s.connected ? "connected" : "detached"} · last frame #${s.last_seq}`
    : s.missing ? "the box no longer keeps this session"
    : `${s.owner} · ${fmtTime(s.started)} – ${fmtTime(s.ended)} (${fmtDur(dur(s.started, s.ended))}) · ${s.cause} · ${s.frames} frames, ${fmtBytes(s.bytes)}`;
  renderPrompts(s);
  renderOutputs(s);
  renderTimeline(s);
  renderResources(s);
}

// Resources: the session's cgroup sampled while it runs, as small charts
// against its limits; the peaks once it has ended.
function renderResources(s) {
  const box = $("resources");
  const lim = state.env?.isolation?.limits || {};
  if (!s.live) {
    const p = s.peaks;
    return box.replaceChildren(p && (p.mem || p.procs) ? el("p", { class: "meta peaks" },
      `peak memory ${fmtBytes(p.mem)}${lim.memory ? " of " + fmtBytes(lim.memory) : ""} · CPU ${p.cpu_s.toFixed(1)} s · up to ${p.procs} processes`) : "");
  }
  const rs = s.resources || [];
  if (!rs.length) return box.replaceChildren();
  const last = rs[rs.length - 1];
  const cpus = rs.map((r) => Math.max(0, r.cpu));
  box.replaceChildren(
    chart("memory", rs.map((r) => r.mem), lim.memory, fmtBytes(last.mem) + (lim.memory ? " of " + fmtBytes(lim.memory) : "")),
    chart("cpu", cpus, lim.cpu || 0, last.cpu >= 0 ? `${last.cpu.toFixed(2)} cores${lim.cpu ? " of " + lim.cpu : ""}` : rs.length < 2 ? "measuring…" : "not counted"),
    chart("processes", rs.map((r) => r.procs), lim.pids, `${last.procs}${lim.pids ? " of " + lim.pids : ""}`));
}

function chart(name, values, limit, label) {
  const W = 240, H = 44;
  const top = Math.max(...values, 1e-9) * 1.15;
  const ceil = limit && limit < top * 4 ? Math.max(limit, top) : top; // draw the limit when it is in sight
  const n = Math.max(values.length - 1, 1);
  const pts = values.map((v, i) => `${((i / n) * W).toFixed(1)},${(H - (v / ceil) * (H - 2)).toFixed(1)}`);
  const g = svg("svg", { viewBox: `0 0 ${W} ${H}`, preserveAspectRatio: "none", class: "chart " + name, role: "img", "aria-label": name });
  if (values.length === 1) pts.push(`${W},${pts[0].split(",")[1]}`);
  g.append(svg("polygon", { points: `0,${H} ${pts.join(" ")} ${W},${H}`, class: "area" }), svg("polyline", { points: pts.join(" "), class: "stroke" }));
  if (limit && ceil === Math.max(limit, top)) g.append(svg("line", { x1: 0, x2: W, y1: H - (limit / ceil) * (H - 2), y2: H - (limit / ceil) * (H - 2), class: "limit" }));
  return el("div", { class: "chart-box", "data-chart": name }, el("div", { class: "meta" }, el("strong", {}, name), " " + label), g);
}

// renderTotals sums the live sessions' latest samples.
function renderTotals() {
  let mem = 0, procs = 0, cpu = 0, sampled = 0;
  for (const s of state.live) {
    const r = s.resources?.[s.resources.length - 1];
    if (!r) continue;
    sampled++;
    mem += r.mem;
    procs += r.procs;
    cpu += Math.max(0, r.cpu);
  }
  const lim = state.env?.isolation?.limits || {};
  const per = [lim.memory && fmtBytes(lim.memory), lim.cpu && lim.cpu + " cores", lim.pids && lim.pids + " processes"].filter(Boolean).join(", ");
  $("totals").textContent = `${state.live.length} live session(s)` + (sampled ? ` · now ${fmtBytes(mem)}, ${cpu.toFixed(2)} cores, ${procs} processes` : "") + (per ? ` · each at most ${per}` : "");
}

function promptOutputs(p) {
  return Object.entries(p.outputs || {}).map(([name, ref]) => outputLink(name, ref));
}

function renderPrompts(s) {
  const box = $("prompts");
  if (!s.prompts.length) return box.replaceChildren(el("p", { class: "meta" }, "no prompts"));
  const head = el("div", { class: "row head" }, ...["state", "prompt", "", "started", "took", "exit", "outputs", ""].map((h) => el("span", {}, h)));
  const rows = s.prompts.map((p) => {
    let label = p.state === "error" && p.code ? `error ${p.code}` : p.state;
    if (p.state === "ended") label = "ended with session";
    let exit = p.exit != null ? String(p.exit) : "";
    if (p.signal) exit += ` (${p.signal})`;
    return el("div", { class: "row", "data-prompt": p.id },
      el("span", { class: "state " + p.state }, label),
      el("code", { title: p.id }, p.id),
      el("span", { class: "text", title: p.text }, p.text,
        p.inputs && p.inputs.length ? el("span", { class: "meta" }, " · inputs: " + p.inputs.join(", ")) : null),
      el("span", { class: "meta" }, fmtTime(p.started || p.queued)),
      el("span", {}, p.started ? fmtDur(dur(p.started, p.ended)) : "queued"),
      el("span", { class: "exit" + (p.exit ? " bad" : "") }, exit, p.limit ? el("span", { class: "limit", title: "the limit that stopped it" }, "limit: " + p.limit) : null),
      el("span", { class: "outs" }, ...promptOutputs(p)),
      s.live ? abortControl(s, p) : el("span"));
  });
  box.replaceChildren(head, ...rows);
}

// abortControl is a live prompt's Abort button, and once pressed the
// question whether to: the page asks inline, never with a dialog. It is
// disabled once the prompt has ended.
function abortControl(s, p) {
  const key = s.id + "\0" + p.id;
  const open = p.state === "queued" || p.state === "running";
  if (!open) {
    state.aborting.delete(key);
    if (state.confirming === key) state.confirming = null;
    return el("span", { class: "abort" }, el("button", { type: "button", class: "abort", disabled: "" }, "Abort"));
  }
  if (state.aborting.has(key)) {
    return el("span", { class: "abort" }, el("button", { type: "button", class: "abort", disabled: "" }, "Aborting…"));
  }
  if (state.confirming !== key) {
    return el("span", { class: "abort" }, el("button", {
      type: "button", class: "abort", onclick: () => { state.confirming = key; renderPrompts(current()); },
    }, "Abort"));
  }
  return el("span", { class: "abort confirm" }, "Abort this prompt? ",
    el("button", { type: "button", class: "abort-yes", onclick: () => abortPrompt(s.id, p.id) }, "yes"),
    el("button", { type: "button", class: "abort-no", onclick: () => { state.confirming = null; renderPrompts(current()); } }, "no"));
}

// abortPrompt asks the box to abort a prompt, as its client's abort
// message would; the prompt's new state comes with the session's frames.
async function abortPrompt(sid, pid) {
  const key = sid + "\0" + pid;
  state.confirming = null;
  state.aborting.add(key);
  renderPrompts(current());
  try {
    const r = await call(`sessions/${encodeURIComponent(sid)}/prompts/${encodeURIComponent(pid)}/abort`, { method: "POST" });
    if (!r.ok) {
      state.aborting.delete(key);
      status(`abort of ${pid}: HTTP ${r.status} ${(await r.text()).trim()}`);
    }
  } catch (e) {
    state.aborting.delete(key);
    status(`abort of ${pid}: box unreachable`);
  }
  refresh();
}

function outputLink(name, ref) {
  const base = name.split("/").pop();
  if (ref.kind === "server" && ref.id) return el("a", { href: api + "files/" + encodeURIComponent(ref.id), download: base, title: "while the box keeps it" }, name);
  if (ref.kind === "inline" && typeof ref.data === "string") {
    const url = URL.createObjectURL(new Blob([b64bytes(ref.data)], { type: ref.mime || "application/octet-stream" }));
    return el("a", { href: url, download: base }, name);
  }
  return el("span", { title: ref.kind }, name);
}

function renderOutputs(s) {
  const ul = $("outputs");
  ul.replaceChildren();
  const seen = new Set();
  const v = state.views.get(s.id);
  for (const p of s.prompts) {
    for (const [name, ref] of Object.entries(p.outputs || {})) {
      const full = v?.outputs.get(p.id + "\0" + name)?.ref || ref;
      seen.add(p.id + "\0" + name);
      ul.append(outputItem(name, full, p.id));
    }
  }
  for (const [k, o] of v?.outputs || []) if (!seen.has(k)) ul.append(outputItem(o.name, o.ref, o.prompt));
  if (!ul.childElementCount) ul.append(el("li", { class: "meta" }, "no outputs"));
}

function outputItem(name, ref, prompt) {
  return el("li", { "data-output": name }, outputLink(name, ref),
    el("span", { class: "meta" }, ` ${ref.kind}${ref.size ? ", " + fmtBytes(ref.size) : ""} · prompt ${prompt}`));
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

// promptHeader starts a prompt's output with a line naming it.
function promptHeader(v, id) {
  if (!id || v.prompt === id) return;
  v.prompt = id;
  endLine(v);
  pushLine(v, [], "prompt");
  v.lines[v.lines.length - 1].prompt = id; // its text is looked up when drawn
}

function pushLine(v, segs, cls) {
  v.lines.push({ segs, cls });
  if (v.lines.length > maxLines) v.lines.splice(0, v.lines.length - maxLines * 0.9);
}

function endLine(v) {
  v.cur = null;
}

// The terminal: text is cut into lines; each line is segments of text
// with the SGR state they were written in. Only \n, \r and SGR
// sequences (ESC [ ... m) act; other escape sequences are dropped.
function newSGR() {
  return { fg: null, bg: null, bold: false, dim: false, italic: false, under: false, inverse: false };
}

function sgrKey(s) {
  const cls = [];
  let style = "";
  let fg = s.fg, bg = s.bg;
  if (s.inverse) [fg, bg] = [bg ?? "d-bg", fg ?? "d-fg"];
  const colour = (c, kind) => {
    if (c == null) return;
    if (typeof c === "number") cls.push(`${kind}${c}`);
    else if (c.startsWith("d-")) cls.push(`${kind}${c}`);
    else style += `${kind === "f" ? "color" : "background-color"}:${c};`;
  };
  colour(fg, "f");
  colour(bg, "b");
  if (s.bold) cls.push("bold");
  if (s.dim) cls.push("dim");
  if (s.italic) cls.push("italic");
  if (s.under) cls.push("under");
  return [cls.join(" "), style];
}

function xterm256(n) {
  if (n < 16) return n;
  if (n < 232) {
    const c = [0, 95, 135, 175, 215, 255];
    n -= 16;
    return `rgb(${c[Math.floor(n / 36)]},${c[Math.floor(n / 6) % 6]},${c[n % 6]})`;
  }
  const g = 8 + (n - 232) * 10;
  return `rgb(${g},${g},${g})`;
}

function applySGR(s, params) {
  const ps = params === "" ? [0] : params.split(/[;:]/).map((x) => (x === "" ? 0 : Number(x)));
  for (let i = 0; i < ps.length; i++) {
    const p = ps[i];
    if (p === 0) Object.assign(s, newSGR());
    else if (p === 1) s.bold = true;
    else if (p === 2) s.dim = true;
    else if (p === 3) s.italic = true;
    else if (p === 4) s.under = true;
    else if (p === 7) s.inverse = true;
    else if (p === 22) s.bold = s.dim = false;
    else if (p === 23) s.italic = false;
    else if (p === 24) s.under = false;
    else if (p === 27) s.inverse = false;
    else if (p >= 30 && p <= 37) s.fg = p - 30;
    else if (p === 39) s.fg = null;
    else if (p >= 40 && p <= 47) s.bg = p - 40;
    else if (p === 49) s.bg = null;
    else if (p >= 90 && p <= 97) s.fg = p - 90 + 8;
    else if (p >= 100 && p <= 107) s.bg = p - 100 + 8;
    else if (p === 38 || p === 48) {
      let c = null;
      if (ps[i + 1] === 5 && i + 2 < ps.length) { c = xterm256(ps[i + 2] & 255); i += 2; }
      else if (ps[i + 1] === 2 && i + 4 < ps.length) { c = `rgb(${ps[i + 2] & 255},${ps[i + 3] & 255},${ps[i + 4] & 255})`; i += 4; }
      else break;
      if (p === 38) s.fg = c; else s.bg = c;
    }
  }
}

// write adds a chunk of a stream to the session's terminal.
function write(v, text, isErr) {
  text = v.pend + text;
  v.pend = "";
  let i = 0, from = 0;
  const flush = (to) => {
    if (to <= from) return;
    if (!v.cur) {
      v.cur = { segs: [], cls: "" };
      pushLine(v, v.cur.segs, "");
      v.cur = v.lines[v.lines.length - 1];
    }
    const [cls, style] = sgrKey(v.sgr);
    const c = (isErr ? "stderr " : "") + cls;
    const last = v.cur.segs[v.cur.segs.length - 1];
    if (last && last[1] === c && last[2] === style) last[0] += text.slice(from, to);
    else v.cur.segs.push([text.slice(from, to), c, style]);
    if (isErr) v.cur.cls = "err";
  };
  while (i < text.length) {
    const ch = text.charCodeAt(i);
    if (ch === 10) { // \n
      flush(i);
      if (!v.cur) pushLine(v, [], isErr ? "err" : "");
      v.cur = null;
      from = ++i;
    } else if (ch === 13) { // \r: a lone one rewrites the line
      flush(i);
      if (text.charCodeAt(i + 1) !== 10 && v.cur && i + 1 < text.length) v.cur.segs.length = 0;
      from = ++i;
    } else if (ch === 27) {
      flush(i);
      const m = /^\x1b(?:\[([0-9;:?]*)([@-~])|\][^\x07\x1b]*(?:\x07|\x1b\\)|[@-Z\\-_])/.exec(text.slice(i, i + 256));
      if (!m) {
        if (text.length - i < 64) { v.pend = text.slice(i); return; } // cut mid-sequence: wait for the rest
        i++;
      } else {
        if (m[2] === "m") applySGR(v.sgr, m[1]);
        i += m[0].length;
      }
      from = i;
    } else if (ch < 32 && ch !== 9) {
      flush(i);
      from = ++i;
    } else i++;
  }
  flush(text.length);
}

function termRow(line) {
  if (line.prompt) {
    const p = current()?.prompts?.find((x) => x.id === line.prompt);
    return el("div", { class: "line prompt" }, el("span", { class: "gutter" }), `▶ ${line.prompt}${p ? "  " + p.text.slice(0, 300) : ""}`);
  }
  const row = el("div", { class: "line " + (line.cls || "") }, el("span", { class: "gutter", title: line.cls === "err" ? "stderr" : null }, line.cls === "err" ? "err" : ""));
  for (const [text, cls, style] of line.segs) {
    const s = el("span", { class: cls || null }, text.length > 4000 ? text.slice(0, 4000) + "…" : text);
    if (style) s.style.cssText = style;
    row.append(s);
  }
  return row;
}

function rawRow(r) {
  const text = r.text.length > 2000 ? r.text.slice(0, 2000) + "…" : r.text;
  return el("div", { class: "line" + (r.kind === "gap" ? " gap" : ""), "data-seq": r.seq != null ? String(r.seq) : null },
    el("span", { class: "seq" }, r.seq != null ? String(r.seq) : ""),
    el("span", { class: "kind" }, (r.id ? `[${r.id}] ` : "") + r.kind), " ", text);
}

// VList draws only the rows in sight: a session's output may be
// hundreds of thousands of lines.
class VList {
  constructor(box, row, count) {
    this.box = box;
    this.row = row;
    this.count = count;
    this.follow = true;
    this.spacer = el("div", { class: "spacer" });
    this.win = el("div", { class: "win" });
    this.spacer.append(this.win);
    box.append(this.spacer);
    this.range = "";
    box.addEventListener("scroll", () => {
      this.follow = box.scrollTop + box.clientHeight >= box.scrollHeight - rowH;
      this.draw();
    });
  }
  show(v) {
    this.v = v;
    this.follow = true;
    this.range = "";
    this.dirty();
  }
  dirty() {
    if (this.pending) return;
    this.pending = true;
    this.force = true;
    requestAnimationFrame(() => { this.pending = false; this.draw(); });
  }
  draw() {
    const box = this.box;
    if (!this.v || box.offsetParent === null) return;
    const n = this.count(this.v);
    this.spacer.style.height = n * rowH + "px";
    if (this.follow) box.scrollTop = box.scrollHeight;
    const first = Math.max(0, Math.floor(box.scrollTop / rowH) - 4);
    const last = Math.min(n, first + Math.ceil(box.clientHeight / rowH) + 8);
    const range = `${first}:${last}:${n}`;
    if (range === this.range && !this.force) return;
    this.range = range;
    this.force = false;
    this.win.style.top = first * rowH + "px";
    const rows = [];
    for (let i = first; i < last; i++) rows.push(this.row(this.v, i));
    if (n === 0) rows.push(el("div", { class: "line meta" }, current()?.live === false ? "the box keeps no output of an ended session: this page shows what it saw while it followed it" : "no output yet"));
    this.win.replaceChildren(...rows);
  }
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

function showSlot(v, slot) {
  const value = el("textarea", { rows: "2", "aria-label": "answer (JSON)" });
  value.value = "true";
  const answer = async (body) => {
    const r = await call(`sessions/${encodeURIComponent(v.id)}/slots/${encodeURIComponent(slot.id)}`, {
      method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(body),
    });
    if (!r.ok) status(`answer to ${slot.id}: HTTP ${r.status} ${await r.text()}`);
  };
  const box = el("div", { class: "slot", "data-slot": slot.id },
    el("div", {}, el("strong", {}, "Display slot · " + slot.renderer), " ", el("code", {}, slot.id)),
    el("pre", {}, JSON.stringify(slot.input, null, 2)),
    value,
    el("button", {
      type: "button", class: "resolve", onclick: () => {
        let val;
        try { val = JSON.parse(value.value); } catch { val = value.value; }
        answer({ value: val });
      },
    }, "Resolve"),
    el("button", { type: "button", class: "reject", onclick: () => answer({ reject: "rejected from the inspector" }) }, "Reject"));
  v.slots.set(slot.id, box);
  if (v.id === state.selected) $("slots").append(box);
}

function b64bytes(s) {
  const bin = atob(s);
  const out = new Uint8Array(bin.length);
  for (let i = 0; i < bin.length; i++) out[i] = bin.charCodeAt(i);
  return out;
}

// Egress: the audit trail's lines of the selected session.
async function loadEgress() {
  const id = state.selected;
  if (!id) return;
  const v = view(id);
  const r = await call(`egress?session=${encodeURIComponent(id)}${v.egressSeq ? "&since=" + v.egressSeq : ""}`);
  if (!r.ok) return;
  for (const line of (await r.text()).split("\n")) {
    if (!line) continue;
    try {
      const e = JSON.parse(line);
      if (e.seq > v.egressSeq) { v.egress.push(e); v.egressSeq = e.seq; }
    } catch { /* a line cut short: skipped */ }
  }
  if (v.egress.length > 5000) v.egress.splice(0, v.egress.length - 5000);
  if (state.selected === id) { renderEgress(v); renderTimeline(current()); }
}

// allowLine is the glovebox.toml line that would let a blocked
// connection through.
function allowLine(e) {
  const host = e.host.includes(":") && !e.host.startsWith("[") ? `[${e.host}]` : e.host;
  return `allow = ["${e.port === 80 || e.port === 443 ? host : host + ":" + e.port}"]`;
}

function renderEgress(v) {
  const box = $("egress");
  if (!v.egress.length) {
    const net = state.env?.network;
    return box.replaceChildren(el("p", { class: "meta" }, net ? "no connections from this session yet" : "this box has no egress proxy: add a [network] table to glovebox.toml"));
  }
  const head = el("tr", {}, ...["time", "", "host", "rule", "bytes", ""].map((h) => el("th", {}, h)));
  const rows = v.egress.slice(-500).reverse().map((e) => {
    const verdict = e.decision === "allow" ? (e.brokered?.length ? "brokered" : "allowed") : e.decision === "deny" ? "blocked" : "error";
    return el("tr", { class: verdict, "data-host": e.host },
      el("td", { class: "meta" }, fmtTime(e.time)),
      el("td", {}, el("span", { class: "verdict " + verdict }, verdict)),
      el("td", { class: "host", title: (e.addrs || []).join(", ") }, `${e.host}:${e.port}`, el("div", { class: "meta" }, e.proto || "")),
      el("td", {}, e.line ? el("code", { title: "glovebox.toml [network]" }, e.line) : el("span", {}, e.rule || ""),
        e.reason ? el("div", { class: "meta" }, e.reason) : null),
      el("td", { class: "bytes" }, `↑ ${fmtBytes(e.bytes_out)}`, el("br"), `↓ ${fmtBytes(e.bytes_in)}`),
      el("td", {}, e.brokered?.length ? el("div", { class: "meta" }, "secrets brokered: " + e.brokered.join(", ")) : null,
        e.decision === "deny" ? el("div", { class: "fix" }, "to allow it, add to glovebox.toml [network]: ", el("code", {}, allowLine(e))) : null));
  });
  box.replaceChildren(el("table", { class: "egress" }, el("thead", {}, head), el("tbody", {}, ...rows)));
}

// The timeline: the session's prompts, display slots, egress decisions
// and outputs on one time axis.
const svgNS = "http://www.w3.org/2000/svg";
function svg(tag, attrs, ...children) {
  const e = document.createElementNS(svgNS, tag);
  for (const [k, val] of Object.entries(attrs)) e.setAttribute(k, String(val));
  for (const c of children) if (c != null) e.append(c);
  return e;
}

function renderTimeline(s) {
  const box = $("timeline");
  if (!s || s.missing) return box.replaceChildren();
  const v = state.views.get(s.id);
  const t0 = new Date(s.started).getTime();
  const t1 = s.live ? Date.now() : new Date(s.ended).getTime();
  const span = Math.max(t1 - t0, 1000);
  const W = 1000, H = 62;
  const x = (t) => Math.max(0, Math.min(W, ((t - t0) / span) * W));
  const g = svg("svg", { viewBox: `0 0 ${W} ${H}`, preserveAspectRatio: "none", class: "timeline", role: "img", "aria-label": "timeline" });
  g.append(svg("line", { x1: 0, x2: W, y1: 56, y2: 56, class: "axis" }));
  for (const p of s.prompts) {
    const a = new Date(p.started || p.queued).getTime();
    const b = p.ended ? new Date(p.ended).getTime() : t1;
    g.append(svg("rect", { x: x(a), y: 4, width: Math.max(2, x(b) - x(a)), height: 16, class: "p " + p.state },
      svg("title", {}, `${p.id} ${p.state} ${fmtDur(b - a)}`)));
  }
  for (const e of v?.egress || []) {
    const t = new Date(e.time).getTime();
    g.append(svg("rect", { x: x(t), y: 26, width: 2, height: 12, class: "e " + e.decision }, svg("title", {}, `${e.decision} ${e.host}:${e.port}`)));
  }
  for (const m of v?.marks || []) {
    if (m.kind === "egress") continue;
    g.append(svg("circle", { cx: x(m.t), cy: 47, r: 4, class: "m mark-" + m.kind }, svg("title", {}, m.label)));
  }
  box.replaceChildren(g, el("div", { class: "axis-labels meta" }, el("span", {}, fmtTime(t0)),
    el("span", {}, "prompts · egress · slots and outputs"), el("span", {}, s.live ? "now" : fmtTime(t1))));
}

// The box at a glance, the JSON behind a toggle.
async function loadEnvironment() {
  const r = await call("environment");
  if (!r.ok) return;
  const env = await r.json();
  state.env = env;
  $("box").textContent = `${env.name || ""} ${env.version || ""}`;
  const rows = [];
  const row = (k, ...v) => rows.push(el("dt", {}, k), el("dd", {}, ...v));
  const chips = (list, cls) => el("span", { class: "chips" }, ...(list || []).map((x) => el("span", { class: cls || null }, x)));
  row("Base image", env.base || "—");
  row("Agent", env.agent || "—");
  const pk = env.packages || {};
  const kinds = ["nix", "apt", "pip", "npm"].filter((k) => pk[k]?.length);
  row("Packages", kinds.length ? el("span", {}, ...kinds.map((k) => el("div", {}, el("span", { class: "meta" }, k + " "), chips(pk[k])))) : "none");
  const iso = env.isolation;
  if (iso) {
    const layers = el("div", { class: "layers" });
    for (const l of iso.active || []) layers.append(el("span", { title: l === "landlock" && iso.landlock ? `ABI ${iso.landlock}` : null }, l));
    for (const l of Object.keys(iso.inactive || {})) layers.append(el("span", { class: "off" }, l + " off"));
    const gaps = el("ul", { class: "gaps" });
    for (const [l, why] of Object.entries(iso.gaps || iso.inactive || {})) gaps.append(el("li", {}, el("strong", {}, l + ": "), why));
    const lim = iso.limits || {};
    const limits = [lim.memory ? "memory " + fmtBytes(lim.memory) : "", lim.cpu ? "cpu " + lim.cpu : "", lim.pids ? lim.pids + " processes" : "", lim.files ? lim.files + " files" : ""].filter(Boolean).join(" · ");
    row("Isolation", layers, iso.degraded ? el("div", { class: "bad" }, "degraded: sessions are not fully kept apart") : null, gaps.childElementCount ? gaps : null,
      el("div", { class: "meta" }, [iso.uids && "uids " + iso.uids, iso.cgroup && "cgroup " + iso.cgroup, limits && "per session: " + limits].filter(Boolean).join(" · ")));
  } else row("Isolation", el("div", { class: "layers" }, el("span", { class: "off" }, "no sandbox report")));
  const l = env.limits || {};
  const lims = Object.entries(l).filter(([, val]) => val).map(([k, val]) => `${k} ${val}`);
  if (lims.length) row("Limits", lims.join(" · "));
  const net = env.network;
  if (net) {
    row("Network", el("div", {}, `${net.mode || ""} · default ${net.default}`),
      net.allow?.length ? el("div", {}, el("span", { class: "meta" }, "allow "), chips(net.allow)) : null,
      net.deny?.length ? el("div", {}, el("span", { class: "meta" }, "deny "), chips(net.deny, "off")) : null,
      net.brokered?.length ? el("div", {}, el("span", { class: "meta" }, "brokered "), chips(net.brokered)) : null);
  } else row("Network", "no egress proxy: the agent's network is what the host gives it");
  if (env.warm) row("Warm pool", env.warm.size ? `${env.warm.ready ?? 0} of ${env.warm.size} ready` : "off");
  row("Versions", `${env.name || ""} ${env.version || ""} · protocol ${env.protocol_version ?? "?"}`, env.capabilities?.length ? el("div", {}, chips(env.capabilities)) : null);
  $("environment").replaceChildren(el("dl", { class: "glance" }, ...rows),
    el("details", {}, el("summary", {}, "JSON"), el("pre", { id: "environment-json" }, JSON.stringify(env, null, 2))));
}

start().catch((e) => status("inspector: " + e));
