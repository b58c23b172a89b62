// Interactive terminals into live sessions. The Terminal button of a live
// session opens one: a shell in the session's sandbox, started as POST
// /sessions/{id}/terminals starts it, drawn in a pane under the page by
// the vendored xterm.js (vendor/xterm/README.md). Its bytes go over a
// WebSocket to /inspect/api/sessions/{id}/terminals/{tid}, which the
// inspector's cookie authenticates; only a login with the box key, or a
// token with the exec scope besides inspect, may open one, and the
// sessions list says whether this one may (state.terminals). Several may
// be open at once, in any live sessions; each resizes with its pane, and
// Close ends it (its shell killed).
"use strict";

const maxShells = 8; // terminals the page holds open at once
const shellInput = 32 << 10; // bytes per input frame (the box takes 64 KiB)
const shells = new Map(); // "sid/tid" -> an open terminal

// The page's CSP (style-src 'self') refuses the <style> elements xterm.js
// writes its cell sizes and colours into. A <style> it creates is made a
// <glovebox-style> instead, whose text and rules go to a constructed
// stylesheet adopted by the document, which the CSP lets the page's own
// script build.
function cspStyles() {
  if (customElements.get("glovebox-style")) return;
  class GloveboxStyle extends HTMLElement {
    #text = "";
    constructor() {
      super();
      this.sheet = new CSSStyleSheet();
    }
    get textContent() { return this.#text; }
    set textContent(v) { this.#text = String(v ?? ""); this.sheet.replaceSync(this.#text); }
    get innerText() { return this.#text; }
    set innerText(v) { this.textContent = v; }
    connectedCallback() {
      if (!document.adoptedStyleSheets.includes(this.sheet)) document.adoptedStyleSheets = [...document.adoptedStyleSheets, this.sheet];
    }
    disconnectedCallback() {
      document.adoptedStyleSheets = document.adoptedStyleSheets.filter((s) => s !== this.sheet);
    }
  }
  customElements.define("glovebox-style", GloveboxStyle);
  const create = Document.prototype.createElement;
  Document.prototype.createElement = function (tag, opts) {
    return create.call(this, String(tag).toLowerCase() === "style" ? "glovebox-style" : tag, opts);
  };
}

// renderShellButton shows the Terminal button on a live session when
// this login may open terminals.
function renderShellButton(s) {
  const b = $("open-shell");
  b.hidden = !(s && s.live && !s.missing && state.terminals);
  b.disabled = shells.size >= maxShells;
}

const shellPath = (sid, tid) => `sessions/${encodeURIComponent(sid)}/terminals${tid ? "/" + encodeURIComponent(tid) : ""}`;

// openShell starts a terminal in session sid and attaches it.
async function openShell(sid) {
  if (shells.size >= maxShells) return status(`at most ${maxShells} terminals at once: close one`);
  let r;
  try {
    r = await call(shellPath(sid), { method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify({ cols: 80, rows: 24 }) });
  } catch {
    return status("terminal: box unreachable");
  }
  if (!r.ok) return status(`terminal: HTTP ${r.status} ${(await r.text()).trim()}`);
  attachShell(sid, await r.json());
}

function attachShell(sid, info) {
  cspStyles();
  const key = sid + "/" + info.id;
  const screen = el("div", { class: "shell-screen" });
  const note = el("span", { class: "meta shell-state" }, "connecting…");
  const box = el("div", { class: "shell", "data-shell": key, "data-session": sid },
    el("div", { class: "shell-head" },
      el("strong", {}, "Terminal " + info.id),
      el("span", { class: "meta" }, ` · session ${sid} · ${(info.command || []).join(" ")} · `),
      note,
      el("button", { type: "button", class: "close-shell", onclick: () => closeShell(key) }, "Close")),
    screen);
  $("shells").append(box);
  $("shells").hidden = false;

  const term = new Terminal({
    cursorBlink: true, scrollback: 5000, fontSize: 13,
    fontFamily: 'ui-monospace, "DejaVu Sans Mono", monospace',
    theme: { background: "#151922", foreground: "#d7dce5" },
  });
  const fit = new FitAddon.FitAddon();
  term.loadAddon(fit);
  term.open(screen);
  const base = location.pathname.replace(/[^/]*$/, "");
  const ws = new WebSocket(`${location.protocol === "https:" ? "wss" : "ws"}://${location.host}${base}${api}${shellPath(sid, info.id)}`);
  ws.binaryType = "arraybuffer";
  const sh = { key, sid, tid: info.id, term, ws, box, exited: false, gone: false, ro: null };
  shells.set(key, sh);
  renderShellButton(current());

  const open = () => ws.readyState === WebSocket.OPEN;
  const utf8 = new TextEncoder();
  const send = (bytes) => {
    for (let i = 0; i < bytes.length; i += shellInput) ws.send(bytes.subarray(i, i + shellInput));
  };
  const resize = () => {
    try { fit.fit(); } catch { /* the pane is hidden: no size to fit */ }
  };
  term.onData((d) => { if (open()) send(utf8.encode(d)); });
  term.onBinary((d) => { if (open()) send(Uint8Array.from(d, (c) => c.charCodeAt(0) & 0xff)); });
  term.onResize(({ cols, rows }) => { if (open()) ws.send(JSON.stringify({ type: "resize", cols, rows })); });
  sh.ro = new ResizeObserver(resize);
  sh.ro.observe(screen);
  ws.onopen = () => {
    note.textContent = "connected";
    resize();
    ws.send(JSON.stringify({ type: "resize", cols: term.cols, rows: term.rows }));
    term.focus();
  };
  ws.onmessage = (ev) => {
    if (typeof ev.data !== "string") return term.write(new Uint8Array(ev.data));
    let m;
    try { m = JSON.parse(ev.data); } catch { return; }
    if (m.type === "exit") {
      sh.exited = true;
      const e = m.exit || {};
      const why = `exited ${e.code ?? "?"}${e.signal ? " (" + e.signal + ")" : ""}${e.limit ? ", limit " + e.limit : ""}`;
      note.textContent = why;
      term.write(`\r\n\x1b[2m[${why}]\x1b[0m\r\n`);
    } else if (m.type === "error") {
      note.textContent = "box: " + m.message;
    }
  };
  ws.onclose = (ev) => {
    box.classList.add("ended");
    // 1001: the box closed it as the session ended; nothing left to kill.
    if (ev.code === 1001) sh.gone = true;
    if (!sh.exited) note.textContent = ev.reason || (ev.code === 1006 ? "the connection was refused or lost" : "disconnected");
  };
}

// closeShell closes a terminal's pane and kills it (DELETE), unless its
// command or its session has ended already.
async function closeShell(key) {
  const sh = shells.get(key);
  if (!sh) return;
  shells.delete(key);
  sh.ro.disconnect();
  sh.ws.close(1000, "closed from the inspector");
  sh.term.dispose();
  sh.box.remove();
  if (!shells.size) $("shells").hidden = true;
  renderShellButton(current());
  if (sh.exited || sh.gone) return;
  try {
    const r = await call(shellPath(sh.sid, sh.tid), { method: "DELETE" });
    if (!r.ok && r.status !== 404) status(`close terminal ${sh.tid}: HTTP ${r.status}`);
  } catch {
    status(`close terminal ${sh.tid}: box unreachable`);
  }
}

// Leaving the page kills its terminals, as Close would: nothing reattaches
// them. A browser that dies without pagehide leaves them running until
// their session ends.
addEventListener("pagehide", () => {
  for (const sh of shells.values()) {
    if (sh.exited || sh.gone) continue;
    fetch(api + shellPath(sh.sid, sh.tid), { method: "DELETE", keepalive: true, credentials: "same-origin", headers: { "X-Glovebox-Inspect": "1" } }).catch(() => {});
  }
});
