// Test helpers: real kits as subprocesses, a proxy that cuts sockets, tokens
// minted by gbx. Every wait has a deadline and says what it waited for.
import { spawn, execFileSync } from "node:child_process";
import { createHash, randomBytes } from "node:crypto";
import { existsSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import net from "node:net";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";

export const binDir = process.env.GLOVEBOX_TS_BIN || fileURLToPath(new URL("./.bin", import.meta.url));

export function bin(name) {
  const p = path.join(binDir, name);
  if (!existsSync(p)) throw new Error(`${p} is missing: run npm run bins (node scripts/build-bins.mjs) first`);
  return p;
}

export function newKey() {
  return randomBytes(32).toString("base64url");
}

/** protocol.Fingerprint: the first 8 and last 4 hex digits of the key's SHA-256. */
export function fingerprint(key) {
  const h = createHash("sha256").update(key).digest("hex");
  return h.slice(0, 8) + "..." + h.slice(-4);
}

export async function freePort() {
  const srv = net.createServer();
  await new Promise((res) => srv.listen(0, "127.0.0.1", res));
  const { port } = srv.address();
  await new Promise((res) => srv.close(res));
  return port;
}

/** Resolves p, or rejects after ms saying what was awaited. */
export function within(ms, what, p) {
  let t;
  return Promise.race([
    p,
    new Promise((_, rej) => {
      t = setTimeout(() => rej(new Error(`timed out after ${ms}ms waiting for ${what}`)), ms);
    }),
  ]).finally(() => clearTimeout(t));
}

/**
 * Starts a kit binary (glovebox-kit or echo-agent) on a free loopback port
 * with a fresh key and root, and resolves once it serves.
 */
export async function startKit({ binary = "glovebox-kit", manifest = {}, env = {} } = {}) {
  const key = newKey();
  const root = mkdtempSync(path.join(os.tmpdir(), "gbx-ts-"));
  const m = { name: "ts-test", version: "0.1.0", agent: { type: "exec" }, ...manifest, key_fingerprint: fingerprint(key) };
  const mpath = path.join(root, "glovebox.json");
  writeFileSync(mpath, JSON.stringify(m));
  const port = await freePort();
  const child = spawn(bin(binary), ["--manifest", mpath, "--root", path.join(root, "box")], {
    env: { PATH: process.env.PATH, HOME: root, GLOVEBOX_KEY: key, GLOVEBOX_PORT: String(port), GLOVEBOX_PUBLIC_URL: `http://127.0.0.1:${port}`, GLOVEBOX_INIT: "off", ...env },
    stdio: ["ignore", "ignore", "pipe"],
  });
  let log = "";
  const exited = new Promise((res) => child.once("exit", (code, sig) => res({ code, sig })));
  await within(30000, `the kit (${binary}) to log "glovebox-kit serving"`, new Promise((res, rej) => {
    child.stderr.on("data", (d) => {
      log += d;
      if (log.includes("glovebox-kit serving")) res();
    });
    exited.then(({ code, sig }) => rej(new Error(`the kit exited (${code ?? sig}) before serving:\n${log}`)));
  }));
  return {
    key,
    port,
    url: `ws://127.0.0.1:${port}/`,
    http: `http://127.0.0.1:${port}`,
    log: () => log,
    /** The directory the kit's fs paths live under. */
    boxRoot: path.join(root, "box"),
    /** Sends the kit a signal. */
    signal: (sig) => child.kill(sig),
    /** Resolves with the kit's exit {code, sig}. */
    exited,
    async stop() {
      child.kill("SIGTERM");
      const t = setTimeout(() => child.kill("SIGKILL"), 10000);
      await within(15000, "the kit to exit", exited);
      clearTimeout(t);
      rmSync(root, { recursive: true, force: true });
    },
  };
}

/** Mints a token with gbx token. */
export function mintToken(key, { scope = "connect,files,environment", ttl = "10m", files = [] } = {}) {
  const args = ["token", "--key", key, "--scope", scope, "--ttl", ttl];
  for (const f of files) args.push("--file", f);
  return execFileSync(bin("gbx"), args, { encoding: "utf8", stdio: ["ignore", "pipe", "ignore"], env: { PATH: process.env.PATH, HOME: os.tmpdir() } }).trim();
}

/**
 * A TCP proxy to target. cut() destroys every connection through it with
 * no WebSocket close frame, as a dropped network does.
 */
export async function cutProxy(targetPort) {
  const socks = new Set();
  const pairs = new Set();
  let cuts = 0;
  const srv = net.createServer((c) => {
    const up = net.connect(targetPort, "127.0.0.1");
    socks.add(c);
    socks.add(up);
    pairs.add([c, up]);
    c.pipe(up);
    up.pipe(c);
    const gone = () => {
      c.destroy();
      up.destroy();
      socks.delete(c);
      socks.delete(up);
    };
    c.on("error", gone).on("close", gone);
    up.on("error", gone).on("close", gone);
  });
  await new Promise((res) => srv.listen(0, "127.0.0.1", res));
  const { port } = srv.address();
  return {
    port,
    url: `ws://127.0.0.1:${port}/`,
    get cuts() {
      return cuts;
    },
    /** Stops forwarding on every open connection and leaves it open: a network that silently stops delivering. */
    freeze() {
      for (const [c, up] of pairs) {
        c.unpipe(up);
        up.unpipe(c);
        c.pause();
        up.pause();
      }
      pairs.clear();
    },
    cut() {
      cuts++;
      for (const s of socks) s.destroy();
      socks.clear();
      pairs.clear();
    },
    async close() {
      for (const s of socks) s.destroy();
      await new Promise((res) => srv.close(res));
    },
  };
}

/** Collects every event of a result. */
export async function collect(iterable, ms = 30000, what = "the prompt's events to end") {
  const out = [];
  await within(ms, what, (async () => {
    for await (const e of iterable) out.push(e);
  })());
  return out;
}

/** The text of the stdout (or another stream's) text_delta events. */
export function streamText(events, stream = "stdout") {
  return events.filter((e) => e.event_type === "text_delta" && e.data.stream === stream).map((e) => e.data.text).join("");
}

/**
 * A WebSocket constructor that records the type of every frame sent and
 * received, around the platform's (or ws's) real one.
 */
export function recordingWebSocket(Base, seen) {
  return class extends Base {
    constructor(...args) {
      super(...args);
      const send = this.send.bind(this);
      this.send = (d) => {
        try {
          seen.sent.add(JSON.parse(d).type);
        } catch {}
        return send(d);
      };
      this.addEventListener?.("message", (ev) => {
        try {
          seen.received.add(JSON.parse(typeof ev.data === "string" ? ev.data : Buffer.from(ev.data).toString()).type);
        } catch {}
      });
    }
  };
}

/** Waits for the first item of a result's stream that matches pred (default: any), with a deadline. */
export async function first(iterable, what, pred = () => true, ms = 20000) {
  return within(ms, what, (async () => {
    for await (const x of iterable) if (pred(x)) return x;
    throw new Error(`the stream ended before ${what}`);
  })());
}
