// The box pane: its sessions over time, their totals, and the box at a
// glance.
"use strict";

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

// The box's snapshots (GET /snapshots), newest first: which session each
// came from, its size and when. Restoring one is gbx restore's.
async function loadSnapshots() {
  const r = await call("snapshots");
  if (!r.ok) {
    $("snapshots").replaceChildren(el("li", { class: "empty meta" }, r.status === 404 ? "no snapshot store" : "could not list the snapshots"));
    return;
  }
  const list = (await r.json()).snapshots || [];
  if (!list.length) {
    $("snapshots").replaceChildren(el("li", { class: "empty meta" }, "none: gbx snapshot SESSION takes one"));
    return;
  }
  $("snapshots").replaceChildren(...list.map((s) => el("li", { class: "empty", title: s.id },
    el("code", {}, s.id.slice(0, 12)), " ",
    el("span", { class: "meta" }, `session ${s.session.slice(0, 8)} · ${s.entries} entries · ${fmtBytes(s.size)} · ${new Date(s.created).toLocaleString()}` + (s.skipped ? ` · ${s.skipped} skipped` : "")))));
}
