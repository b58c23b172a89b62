// Measures the TypeScript client against real kits in other processes:
// events per second into the client, and prompt round trips.
//
//	npm run build && npm run bins && node scripts/bench.mjs
import { performance } from "node:perf_hooks";
import { GloveboxClient } from "@glovebox-dev/client";
import { startKit } from "../test/helpers.mjs";

const runtime = `Node ${process.versions.node}, ${globalThis.WebSocket ? "global WebSocket" : "ws package"}`;

function quantile(xs, q) {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor(q * s.length))];
}

async function events(client, n) {
  const text = Array.from({ length: n }, (_, i) => `w${i}`).join(" ");
  const t0 = performance.now();
  const r = client.box("echo").prompt(text);
  let count = 0;
  const display = (async () => {
    for await (const d of r.display) if (d.type === "push") await r.resolve(d.slot.id, false);
  })();
  for await (const e of r.events) if (e.event_type === "text_delta") count++;
  await r.done;
  await display;
  const s = (performance.now() - t0) / 1000;
  if (count !== n) throw new Error(`got ${count} events, want ${n}`);
  return n / s;
}

/** The floor: the same prompt read by a bare WebSocket that only parses each frame. */
async function rawEvents(kit, n) {
  const WS = globalThis.WebSocket ?? (await import("ws")).WebSocket;
  const ws = globalThis.WebSocket ? new WS(kit.url, ["glovebox.v1", "bearer." + kit.key]) : new WS(kit.url, [], { headers: { Authorization: "Bearer " + kit.key } });
  await new Promise((res, rej) => ((ws.onopen = res), (ws.onerror = rej)));
  const text = Array.from({ length: n }, (_, i) => `w${i}`).join(" ");
  let count = 0;
  const t0 = performance.now();
  await new Promise((res) => {
    ws.onmessage = (e) => {
      const m = JSON.parse(e.data);
      if (m.type === "event" && m.event_type === "text_delta") count++;
      else if (m.type === "display_push") ws.send(JSON.stringify({ type: "display_resolve", slot_id: m.slot.id, value: false }));
      else if (m.type === "complete") res();
    };
    ws.send(JSON.stringify({ type: "prompt", id: "raw", text }));
  });
  ws.close();
  if (count !== n) throw new Error(`raw: got ${count} events, want ${n}`);
  return n / ((performance.now() - t0) / 1000);
}

async function roundTrips(client, box, text, n, answer) {
  const times = [];
  for (let i = 0; i < n + 20; i++) {
    const t0 = performance.now();
    const r = client.box(box).prompt(text, { discardEvents: true });
    if (answer) {
      for await (const d of r.display) if (d.type === "push") r.resolve(d.slot.id, false);
    }
    await r.done;
    if (i >= 20) times.push(performance.now() - t0); // the first 20 warm up
  }
  return { median: quantile(times, 0.5), p99: quantile(times, 0.99) };
}

const echo = await startKit({ binary: "echo-agent", manifest: { agent: { type: "go" } } });
const exec = await startKit();
const client = GloveboxClient.make({
  endpoints: { echo: { url: echo.url, key: echo.key }, exec: { url: exec.url, key: exec.key } },
});
try {
  const n = 100000;
  await events(client, 10000); // warm up
  const rates = [];
  for (let i = 0; i < 3; i++) rates.push(await events(client, n));
  console.log(`${runtime}`);
  console.log(`events into the client (echo-agent, ${n} text_delta events per prompt, 3 runs): ${rates.map((r) => Math.round(r).toLocaleString("en-US")).join(", ")} events/s`);
  const raw = [];
  for (let i = 0; i < 3; i++) raw.push(await rawEvents(echo, n));
  console.log(`the same prompts read by a bare WebSocket that only parses each frame (3 runs): ${raw.map((r) => Math.round(r).toLocaleString("en-US")).join(", ")} events/s`);
  const slot = await roundTrips(client, "echo", "hi", 500, true);
  console.log(`prompt + display slot round trip (echo-agent, 500 prompts): median ${(slot.median * 1000).toFixed(0)} us, p99 ${(slot.p99 * 1000).toFixed(0)} us`);
  const sh = await roundTrips(client, "exec", "true", 200, false);
  console.log(`prompt round trip (exec agent running /bin/sh -c true, 200 prompts): median ${sh.median.toFixed(2)} ms, p99 ${sh.p99.toFixed(2)} ms`);
} finally {
  await client.close();
  await echo.stop();
  await exec.stop();
}
