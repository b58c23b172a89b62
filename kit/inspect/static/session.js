// The selected session's pane: its resources, prompts, display slots,
// outputs, egress and timeline.
"use strict";

function renderSession() {
  const s = current();
  if (!s) return;
  $("session-title").textContent = `Session ${s.id}${s.live ? "" : " (ended)"}`;
  $("session-meta").textContent = s.live
    ? `${s.owner} · since ${fmtTime(s.started)} · ${linkState(s)} · last frame #${s.last_seq}`
    : s.missing ? "the box no longer keeps this session"
    : `${s.owner} · ${fmtTime(s.started)} – ${fmtTime(s.ended)} (${fmtDur(dur(s.started, s.ended))}) · ${s.cause} · ${s.frames} frames, ${fmtBytes(s.bytes)}`;
  renderShellButton(s);
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
