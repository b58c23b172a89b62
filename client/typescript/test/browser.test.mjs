// The client in headless Chromium (Debian's, driven by playwright-core; no
// browser is downloaded), from a page served on loopback by a host server
// that also proxies the box, with a token for auth.
import assert from "node:assert/strict";
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import http from "node:http";
import net from "node:net";
import os from "node:os";
import path from "node:path";
import { after, before, test } from "node:test";
import { fileURLToPath } from "node:url";
import { freePort, mintToken, startKit, within } from "./helpers.mjs";

const chromium = process.env.CHROMIUM ?? "/usr/bin/chromium";
const root = fileURLToPath(new URL("..", import.meta.url));

/** A host app's server: its page and the client's modules, and every other path proxied to the box. */
async function startHost(port, kitPort) {
  const server = http.createServer((req, res) => {
    const u = new URL(req.url, "http://x");
    const file = u.pathname === "/app/" ? path.join(root, "test/browser/index.html") : u.pathname.startsWith("/dist/") ? path.join(root, path.normalize(u.pathname)) : undefined;
    if (file) {
      if (!file.startsWith(root) || !existsSync(file)) return res.writeHead(404).end();
      res.writeHead(200, { "Content-Type": file.endsWith(".html") ? "text/html" : "text/javascript", "Cache-Control": "no-store" });
      return res.end(readFileSync(file));
    }
    const up = http.request({ host: "127.0.0.1", port: kitPort, method: req.method, path: req.url, headers: req.headers }, (r) => {
      res.writeHead(r.statusCode, r.headers);
      r.pipe(res);
    });
    up.on("error", () => res.writeHead(502).end());
    req.pipe(up);
  });
  const sockets = new Set();
  server.on("upgrade", (req, socket, head) => {
    const up = net.connect(kitPort, "127.0.0.1", () => {
      let raw = `${req.method} ${req.url} HTTP/1.1\r\n`;
      for (let i = 0; i < req.rawHeaders.length; i += 2) raw += `${req.rawHeaders[i]}: ${req.rawHeaders[i + 1]}\r\n`;
      up.write(raw + "\r\n");
      up.write(head);
      socket.pipe(up);
      up.pipe(socket);
    });
    sockets.add(socket).add(up);
    const gone = () => {
      socket.destroy();
      up.destroy();
    };
    socket.on("error", gone).on("close", gone);
    up.on("error", gone).on("close", gone);
  });
  await new Promise((res) => server.listen(port, "127.0.0.1", res));
  return {
    origin: `http://127.0.0.1:${port}`,
    async close() {
      for (const s of sockets) s.destroy();
      server.closeAllConnections?.();
      await new Promise((res) => server.close(res));
    },
  };
}

let kit;
let host;
let context;
let profile;
before(async () => {
  // The box's public URL is the host's origin, where the page reaches it,
  // so its server refs point there.
  const port = await freePort();
  kit = await startKit({ env: { GLOVEBOX_PUBLIC_URL: `http://127.0.0.1:${port}` } });
  host = await startHost(port, kit.port);
});
after(async () => {
  await context?.close();
  if (profile) rmSync(profile, { recursive: true, force: true });
  await host?.close();
  await kit?.stop();
});

const skip = !existsSync(chromium) && `no ${chromium}: apt-get install chromium`;

/** Opens the test page once Chromium runs, and returns what its scenario reported, and its console. */
async function runPage(fragment) {
  if (!context) {
    const { chromium: pw } = await import("playwright-core");
    profile = mkdtempSync(path.join(os.tmpdir(), "gbx-chromium-"));
    context = await within(60000, "Chromium to start", pw.launchPersistentContext(profile, {
      executablePath: chromium,
      headless: true,
      args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking", "--disable-component-update", "--disable-sync"],
    }));
  }
  const page = await context.newPage();
  const consoleLines = [];
  page.on("console", (m) => consoleLines.push(m.text()));
  page.on("pageerror", (e) => consoleLines.push(String(e)));
  try {
    await page.goto(`${host.origin}/app/#${fragment}`);
    await within(60000, "the page's scenario to finish", page.waitForFunction(() => window.__result !== undefined, null, { timeout: 60000 }));
    return { r: await page.evaluate(() => window.__result), console: consoleLines.join("\n") };
  } finally {
    await page.close();
  }
}

/** Checks everything the page's scenario reports. */
function checkScenario({ r, console }) {
  assert.equal(r.failed, undefined, `${r.failed}\nconsole:\n${console}`);
  assert.equal(r.keyRefused, true);
  // stdout and stderr are two pipes: their order between each other is
  // not defined, each stream's own order is, and the exit event comes last.
  const deltas = r.events.slice(0, -1).sort((a, b) => String(a[1]?.stream).localeCompare(String(b[1]?.stream)));
  assert.deepEqual(deltas, [
    ["text_delta", { text: "err\n", stream: "stderr" }],
    ["text_delta", { text: "from a blob\n", stream: "stdout" }],
  ]);
  assert.deepEqual(r.events.at(-1), ["exit", { code: 0 }]);
  assert.equal(r.message, "from a blob\n");
  assert.equal(r.a, "out");
  assert.equal(r.bigKind, "server");
  assert.equal(r.bigLength, 2000000);
  assert.equal(r.env, "ts-test");
  assert.equal(r.health, true);
  assert.equal(r.abortCode, "AbortError");
  assert.ok(r.capabilities.includes("bearer_subprotocol") && r.capabilities.includes("tokens"));
}

test("a page prompts a box with a token: events, inputs, outputs, environment, health, abort", { skip }, async () => {
  const token = mintToken(kit.key, { scope: "connect,files,environment", ttl: "5m" });
  checkScenario(await runPage(`token=${encodeURIComponent(token)}`));
});

test("a page on another origin calls a box that lists it in [http] cors_origins, and not one that does not", { skip }, async () => {
  const allowing = await startKit({ manifest: { http: { cors_origins: [host.origin] } } });
  const refusing = await startKit();
  try {
    const token = mintToken(allowing.key, { scope: "connect,files,environment", ttl: "5m" });
    checkScenario(await runPage(`token=${encodeURIComponent(token)}&box=127.0.0.1:${allowing.port}`));
    // Without the entry the WebSocket still works (browsers apply no CORS
    // to it), but the page may not read the box's HTTP answers.
    const other = mintToken(refusing.key, { scope: "connect,files,environment", ttl: "5m" });
    const { r } = await runPage(`token=${encodeURIComponent(other)}&box=127.0.0.1:${refusing.port}`);
    assert.match(r.failed ?? "", /fetch|network|CORS/i, `the page read a box on another origin that does not list it: ${JSON.stringify(r)}`);
  } finally {
    await allowing.stop();
    await refusing.stop();
  }
});
