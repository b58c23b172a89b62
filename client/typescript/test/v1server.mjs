// A v1-only box, written from the original's behavioural spec (§4, §5.3):
// Authorization: Bearer on the upgrade (401 written raw otherwise), no
// hello, no seq, display frames without a prompt id, abort only of the
// running prompt, prompts on one connection run one after another, ping
// answered with pong, unknown types and bad JSON ignored. Its "agent" is
// a script keyed by the prompt's first word.
import { randomUUID, timingSafeEqual } from "node:crypto";
import http from "node:http";
import { WebSocketServer } from "ws";

export async function startV1({ key, name = "v1box", version = "1.0.0" }) {
  const files = new Map(); // id -> {name, mime, bytes}
  let port = 0;
  const keyBuf = Buffer.from(key);
  const authorized = (h) => {
    if (typeof h !== "string" || !h.startsWith("Bearer ")) return false;
    const t = Buffer.from(h.slice(7).trim());
    return t.length === keyBuf.length && timingSafeEqual(t, keyBuf);
  };
  const server = http.createServer((req, res) => {
    const u = new URL(req.url, "http://x");
    const m = /^\/files\/([A-Za-z0-9_-]+)$/.exec(u.pathname);
    if (m) {
      if (req.method !== "GET") return res.writeHead(405).end();
      if (!authorized(req.headers.authorization)) return res.writeHead(401).end();
      const f = files.get(m[1]);
      if (!f) return res.writeHead(404).end();
      res.writeHead(200, { "Content-Type": f.mime, "Content-Length": f.bytes.length, "Cache-Control": "private, no-store" });
      res.end(f.bytes);
      if (u.searchParams.get("consume") === "1") files.delete(m[1]);
      return;
    }
    if (req.url === "/health") {
      res.writeHead(200, { "Content-Type": "application/json" });
      return res.end(JSON.stringify({ ok: true, name, version }));
    }
    if (req.url === "/environment") {
      if (!authorized(req.headers.authorization)) return res.writeHead(401).end();
      res.writeHead(200, { "Content-Type": "application/json", "Cache-Control": "private, no-store" });
      return res.end(JSON.stringify({ name, version, base: "glovebox/base", fs: { work: { path: "/work", writable: true } }, packages: {}, limits: {}, protocol_version: 1 }));
    }
    res.writeHead(404).end();
  });
  const wss = new WebSocketServer({ noServer: true, maxPayload: 100 << 20 });
  server.on("upgrade", (req, socket, head) => {
    if (!authorized(req.headers.authorization)) {
      socket.write("HTTP/1.1 401 Unauthorized\r\n\r\n");
      socket.destroy();
      return;
    }
    wss.handleUpgrade(req, socket, head, (ws) => session(ws));
  });
  const conns = new Set();
  const slots = new Map(); // slot id -> resolver, shared by every connection as in v1
  let slotN = 0;

  function session(ws) {
    conns.add(ws);
    let chain = Promise.resolve();
    const inflight = new Map();
    const send = (m) => ws.readyState === 1 && ws.send(JSON.stringify(m));
    ws.on("close", () => {
      conns.delete(ws);
      for (const ac of inflight.values()) ac.abort();
    });
    ws.on("message", (data) => {
      let m;
      try {
        m = JSON.parse(String(data));
      } catch {
        return;
      }
      switch (m?.type) {
        case "prompt":
          chain = chain.then(() => run(m)).catch(() => {});
          break;
        case "abort":
          inflight.get(m.id)?.abort();
          break;
        case "display_resolve":
        case "display_reject": {
          const s = slots.get(m.slot_id);
          if (!s) return;
          slots.delete(m.slot_id);
          send({ type: "display_clear", slot_id: m.slot_id });
          s(m.type === "display_resolve" ? { value: m.value } : { error: m.error });
          break;
        }
        case "ping":
          send({ type: "pong", ts: m.ts });
          break;
      }
    });
    async function run(p) {
      const ac = new AbortController();
      inflight.set(p.id, ac);
      const event = (event_type, data) => send({ type: "event", id: p.id, event_type, data });
      try {
        const [verb, ...rest] = String(p.text).split(" ");
        const outputs = {};
        let message = "";
        switch (verb) {
          case "echo":
            for (const w of rest) event("text_delta", { text: w + " " });
            message = rest.join(" ");
            break;
          case "inputs":
            message = Object.entries(p.inputs ?? {}).map(([n, r]) => `${n}:${Buffer.from(r.data, "base64").toString()}`).join(",");
            break;
          case "files": {
            const big = Buffer.alloc(2 << 20, 7);
            const id = randomUUID();
            files.set(id, { name: "big.bin", mime: "application/octet-stream", bytes: big });
            outputs["small.txt"] = { kind: "inline", name: "small.txt", mime: "text/plain", data: Buffer.from("small").toString("base64") };
            outputs["big.bin"] = { kind: "server", name: "big.bin", mime: "application/octet-stream", size: big.length, id, url: `http://127.0.0.1:${port}/files/${id}` };
            message = "two files";
            break;
          }
          case "ask": {
            const id = `slot_${++slotN}`;
            const answer = new Promise((res) => slots.set(id, res));
            send({ type: "display_push", slot: { renderer: "confirm", input: { question: rest.join(" ") }, id } });
            const a = await Promise.race([answer, new Promise((_, rej) => ac.signal.addEventListener("abort", () => rej(abortError())))]);
            if (a.error !== undefined) throw Object.assign(new Error(String(a.error)), { name: "Error" });
            message = `answer: ${JSON.stringify(a.value)}`;
            break;
          }
          case "wait":
            event("text_delta", { text: "waiting" });
            await new Promise((_, rej) => ac.signal.addEventListener("abort", () => rej(abortError())));
            break;
          case "fail":
            throw new Error("it failed");
          case "drop":
            event("text_delta", { text: "dropping" });
            setTimeout(() => ws.terminate(), 50);
            await new Promise((_, rej) => ac.signal.addEventListener("abort", () => rej(abortError())));
            break;
        }
        send({ type: "complete", id: p.id, message, outputs });
      } catch (e) {
        send({ type: "error", id: p.id, error: { code: e?.name ?? "error", message: e?.message ?? String(e) } });
      } finally {
        inflight.delete(p.id);
      }
    }
  }
  await new Promise((res) => server.listen(0, "127.0.0.1", res));
  port = server.address().port;
  return {
    url: `ws://127.0.0.1:${port}/`,
    port,
    async close() {
      for (const ws of conns) ws.terminate();
      wss.close();
      server.closeAllConnections?.();
      await new Promise((res) => server.close(res));
    },
  };
}

function abortError() {
  return Object.assign(new Error("This operation was aborted"), { name: "AbortError" });
}
