// The Glovebox inspector. Everything the box sends is data: it is shown
// with textContent, never parsed as HTML.
"use strict";

const api = "api/";
const maxEvents = 2000; // lines kept on the page; older ones scroll away
const state = { selected: null, stream: null, sessions: [], slots: new Map(), outputs: new Map() };

function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === "class") e.className = v;
    else if (k.startsWith("on")) e.addEventListener(k.slice(2), v);
    else e.setAttribute(k, v);
  }
  for (const c of children) if (c != null) e.append(c);
  return e;
}

function status(text) {
  document.getElementById("status").textContent = text;
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
  render(await r.json());
}

function showLogin() {
  document.getElementById("main").hidden = true;
  const form = document.getElementById("login");
  form.hidden = false;
  status("not signed in");
  form.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    const input = document.getElementById("token");
    const ok = await login(input.value.trim());
    input.value = "";
    if (!ok) return status("refused: use the key or a token with the inspect scope");
    form.hidden = true;
    start();
  }, { once: true });
}

function showMain() {
  document.getElementById("main").hidden = false;
  status("live");
  loadEnvironment();
  setInterval(refresh, 2000);
}

async function refresh() {
  try {
    const r = await call("sessions");
    if (r.status === 401) return status("signed out: reload the page with a token");
    if (r.ok) render(await r.json());
  } catch (e) {
    status("box unreachable");
  }
}

function fmtTime(s) {
  return s ? new Date(s).toLocaleTimeString() : "";
}

function render(data) {
  state.sessions = data.sessions || [];
  const list = document.getElementById("sessions");
  list.replaceChildren();
  if (state.sessions.length === 0) list.append(el("li", { class: "meta" }, "no live sessions"));
  for (const s of state.sessions) {
    const li = el("li", { "data-session": s.id, onclick: () => select(s.id) },
      el("div", { class: "id" }, s.id),
      el("div", { class: "meta" }, `${s.owner} · since ${fmtTime(s.started)} · ${s.connected ? "connected" : "detached"} · ${s.prompts.length} prompt(s)`));
    if (s.id === state.selected) li.classList.add("selected");
    list.append(li);
  }
  if (state.selected && !state.sessions.some((s) => s.id === state.selected)) {
    document.getElementById("session-title").textContent = `Session ${state.selected} (ended)`;
  }
  renderPrompts();
}

function renderPrompts() {
  const s = state.sessions.find((x) => x.id === state.selected);
  const ul = document.getElementById("prompts");
  if (!s) return;
  ul.replaceChildren();
  for (const p of s.prompts) {
    const label = p.state === "error" && p.code ? `error ${p.code}` : p.state;
    ul.append(el("li", { "data-prompt": p.id },
      el("span", { class: "state " + p.state }, label), " ",
      el("code", {}, p.id), " ",
      el("span", {}, p.text),
      p.inputs && p.inputs.length ? el("span", { class: "meta" }, " inputs: " + p.inputs.join(", ")) : null));
  }
}

function select(id) {
  if (state.stream) state.stream.close();
  state.selected = id;
  state.slots.clear();
  state.outputs.clear();
  document.getElementById("session-title").textContent = "Session " + id;
  document.getElementById("events").replaceChildren();
  document.getElementById("slots").replaceChildren();
  document.getElementById("outputs").replaceChildren();
  for (const li of document.querySelectorAll("#sessions li")) li.classList.toggle("selected", li.dataset.session === id);
  renderPrompts();
  follow(id);
}

// follow reads the session's frames; the box drops an observer that falls
// behind, and the page then follows again from the frames the box kept.
function follow(id) {
  const es = new EventSource(api + "sessions/" + encodeURIComponent(id) + "/events");
  state.stream = es;
  let seen = 0;
  es.addEventListener("frame", (ev) => {
    const f = JSON.parse(ev.data);
    if (typeof f.seq === "number") {
      if (f.seq <= seen) return;
      seen = f.seq;
    }
    frame(f);
  });
  es.addEventListener("end", (ev) => {
    es.close();
    if (ev.data === "dropped" && state.selected === id) {
      setTimeout(() => { if (state.selected === id) follow(id); }, 500);
    } else {
      status("session " + id.slice(0, 8) + "… ended");
    }
  });
  es.onerror = () => { if (es.readyState === EventSource.CLOSED) status("event stream closed"); };
}

function frame(f) {
  const line = (kind, text) => {
    const li = el("li", {}, el("span", { class: "kind" }, kind), " ", text);
    if (typeof f.seq === "number") li.dataset.seq = String(f.seq);
    const list = document.getElementById("events");
    list.append(li);
    while (list.childElementCount > maxEvents) list.firstElementChild.remove();
  };
  switch (f.type) {
    case "event":
      line(`[${f.id}] ${f.event_type}`, JSON.stringify(f.data));
      break;
    case "display_push":
      line(`[${f.id || ""}] display_push`, `${f.slot.renderer} ${JSON.stringify(f.slot.input)}`);
      showSlot(f.slot);
      break;
    case "display_clear":
      line("display_clear", f.slot_id);
      state.slots.get(f.slot_id)?.remove();
      state.slots.delete(f.slot_id);
      break;
    case "complete":
      line(`[${f.id}] complete`, JSON.stringify(f.message));
      showOutputs(f.id, f.outputs || {});
      break;
    case "error":
      line(`[${f.id}] error`, `${f.error.code}: ${f.error.message}`);
      break;
    default:
      line(f.type, JSON.stringify(f));
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

function showSlot(slot) {
  const value = el("textarea", { rows: "2", "aria-label": "answer (JSON)" });
  value.value = "true";
  const answer = async (body) => {
    const r = await call(`sessions/${encodeURIComponent(state.selected)}/slots/${encodeURIComponent(slot.id)}`, {
      method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(body),
    });
    if (!r.ok) status(`answer to ${slot.id}: HTTP ${r.status} ${await r.text()}`);
  };
  const box = el("div", { class: "slot", "data-slot": slot.id },
    el("div", {}, el("strong", {}, slot.renderer), " ", el("code", {}, slot.id)),
    el("pre", {}, JSON.stringify(slot.input, null, 2)),
    value,
    el("button", {
      type: "button", class: "resolve", onclick: () => {
        let v;
        try { v = JSON.parse(value.value); } catch { v = value.value; }
        answer({ value: v });
      },
    }, "Resolve"),
    el("button", { type: "button", class: "reject", onclick: () => answer({ reject: "rejected from the inspector" }) }, "Reject"));
  state.slots.set(slot.id, box);
  document.getElementById("slots").append(box);
}

function b64bytes(s) {
  const bin = atob(s);
  const out = new Uint8Array(bin.length);
  for (let i = 0; i < bin.length; i++) out[i] = bin.charCodeAt(i);
  return out;
}

function showOutputs(promptID, outputs) {
  const ul = document.getElementById("outputs");
  for (const [name, ref] of Object.entries(outputs)) {
    let link;
    if (ref.kind === "server" && ref.id) {
      link = el("a", { href: api + "files/" + encodeURIComponent(ref.id), download: name.split("/").pop() }, name);
    } else if (ref.kind === "inline" && typeof ref.data === "string") {
      const url = URL.createObjectURL(new Blob([b64bytes(ref.data)], { type: ref.mime || "application/octet-stream" }));
      link = el("a", { href: url, download: name.split("/").pop() }, name);
    } else {
      link = el("span", {}, name);
    }
    ul.append(el("li", { "data-output": name }, link, el("span", { class: "meta" }, ` ${ref.kind}${ref.size ? ", " + ref.size + " bytes" : ""} · prompt ${promptID}`)));
  }
}

async function loadEnvironment() {
  const r = await call("environment");
  if (!r.ok) return;
  const env = await r.json();
  document.getElementById("box").textContent = `${env.name || ""} ${env.version || ""}`;
  const div = document.getElementById("environment");
  const iso = env.isolation;
  const layers = el("div", { class: "layers" });
  if (iso) {
    for (const l of iso.active || []) layers.append(el("span", {}, l));
    for (const [l, why] of Object.entries(iso.inactive || {})) layers.append(el("span", { class: "off", title: why }, l + " off"));
  } else {
    layers.append(el("span", { class: "off" }, "no sandbox report"));
  }
  div.replaceChildren(el("div", {}, "Isolation"), layers, el("pre", { id: "environment-json" }, JSON.stringify(env, null, 2)));
}

start().catch((e) => status("inspector: " + e));
