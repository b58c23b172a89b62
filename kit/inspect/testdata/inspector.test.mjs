// The kit's inspector end to end: a real kit (examples/echo-agent, built
// here with go build) with the inspector on, a real WebSocket session
// prompting it, and the page in headless Chromium (Debian's, driven by
// playwright-core; no browser is downloaded) following that session,
// answering its display slot, offering its output for download, showing
// the isolation report; then a screenshot checked for content.
import assert from "node:assert/strict";
import { execFileSync, spawn } from "node:child_process";
import { createHmac, randomBytes, createHash } from "node:crypto";
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import net from "node:net";
import os from "node:os";
import path from "node:path";
import { after, before, test } from "node:test";
import { fileURLToPath } from "node:url";
import { inflateSync } from "node:zlib";
import WebSocket from "ws";

const chromium = process.env.CHROMIUM ?? "/usr/bin/chromium";
const repo = fileURLToPath(new URL("../../..", import.meta.url));

/** Resolves p, or rejects after ms saying what was awaited. */
function within(ms, what, p) {
  let t;
  return Promise.race([
    p,
    new Promise((_, rej) => {
      t = setTimeout(() => rej(new Error(`timed out after ${ms}ms waiting for ${what}`)), ms);
    }),
  ]).finally(() => clearTimeout(t));
}

async function freePort() {
  const srv = net.createServer();
  await new Promise((res) => srv.listen(0, "127.0.0.1", res));
  const { port } = srv.address();
  await new Promise((res) => srv.close(res));
  return port;
}

const b64url = (b) => Buffer.from(b).toString("base64url");

/** protocol.MintToken, from its documented format. */
function mintToken(key, scopes, ttlSeconds) {
  const macKey = createHmac("sha256", key).update("glovebox token v1").digest();
  const signed = "gbt1." + b64url(JSON.stringify({ scopes, exp: Math.floor(Date.now() / 1000) + ttlSeconds }));
  return signed + "." + b64url(createHmac("sha256", macKey).update(signed).digest());
}

function fingerprint(key) {
  const h = createHash("sha256").update(key).digest("hex");
  return h.slice(0, 8) + "..." + h.slice(-4);
}

/** Decodes an 8-bit RGB or RGBA PNG into its pixels. */
function decodePNG(buf) {
  assert.equal(buf.subarray(1, 4).toString(), "PNG", "not a PNG");
  let off = 8;
  let width, height, channels;
  const idat = [];
  while (off < buf.length) {
    const len = buf.readUInt32BE(off);
    const type = buf.subarray(off + 4, off + 8).toString();
    const data = buf.subarray(off + 8, off + 8 + len);
    if (type === "IHDR") {
      width = data.readUInt32BE(0);
      height = data.readUInt32BE(4);
      assert.equal(data[8], 8, "bit depth");
      channels = { 2: 3, 6: 4 }[data[9]];
      assert.ok(channels, `colour type ${data[9]}`);
    } else if (type === "IDAT") idat.push(data);
    off += 12 + len;
  }
  const raw = inflateSync(Buffer.concat(idat));
  const stride = width * channels;
  const px = Buffer.alloc(height * stride);
  for (let y = 0; y < height; y++) {
    const f = raw[y * (stride + 1)];
    const line = raw.subarray(y * (stride + 1) + 1, (y + 1) * (stride + 1));
    for (let x = 0; x < stride; x++) {
      const a = x >= channels ? px[y * stride + x - channels] : 0;
      const b = y > 0 ? px[(y - 1) * stride + x] : 0;
      const c = x >= channels && y > 0 ? px[(y - 1) * stride + x - channels] : 0;
      let v = line[x];
      if (f === 1) v += a;
      else if (f === 2) v += b;
      else if (f === 3) v += (a + b) >> 1;
      else if (f === 4) {
        const p = a + b - c, pa = Math.abs(p - a), pb = Math.abs(p - b), pc = Math.abs(p - c);
        v += pa <= pb && pa <= pc ? a : pb <= pc ? b : c;
      }
      px[y * stride + x] = v & 0xff;
    }
  }
  return { width, height, channels, px };
}

let kit;
let root;
let context;
let profile;
let ws;

before(async () => {
  root = mkdtempSync(path.join(os.tmpdir(), "gbx-inspect-"));
  const bin = path.join(root, "echo-agent");
  execFileSync("go", ["build", "-o", bin, "./examples/echo-agent"], { cwd: repo, stdio: "inherit" });
  const key = randomBytes(32).toString("base64url");
  const manifest = {
    name: "inspected", version: "0.3.0", agent: { type: "go" }, inspect: { enabled: true }, key_fingerprint: fingerprint(key),
    // Every output parks in the box's store, so the page downloads it from there.
    storage_policy: { outputs: { rules: [{ use: { adapter: "localServer" }, when: { default: true } }] } },
  };
  writeFileSync(path.join(root, "glovebox.json"), JSON.stringify(manifest));
  const port = await freePort();
  const child = spawn(bin, ["--manifest", path.join(root, "glovebox.json"), "--root", path.join(root, "box")], {
    env: { PATH: process.env.PATH, HOME: root, GLOVEBOX_KEY: key, GLOVEBOX_PORT: String(port), GLOVEBOX_PUBLIC_URL: `http://127.0.0.1:${port}`, GLOVEBOX_INIT: "off" },
    stdio: ["ignore", "ignore", "pipe"],
  });
  let log = "";
  const exited = new Promise((res) => child.once("exit", (code, sig) => res(code ?? sig)));
  await within(30000, 'the kit to log "glovebox-kit serving"', new Promise((res, rej) => {
    child.stderr.on("data", (d) => {
      log += d;
      if (log.includes("glovebox-kit serving")) res();
    });
    exited.then((c) => rej(new Error(`the kit exited (${c}) before serving:\n${log}`)));
  }));
  kit = { key, port, http: `http://127.0.0.1:${port}`, child, exited, log: () => log };
});

after(async () => {
  ws?.terminate();
  await context?.close();
  if (profile) rmSync(profile, { recursive: true, force: true });
  if (kit) {
    kit.child.kill("SIGTERM");
    await within(15000, "the kit to exit", kit.exited);
  }
  if (root) rmSync(root, { recursive: true, force: true });
});

test("the inspector follows a live session, answers its slot, offers its output and shows the box", { skip: !existsSync(chromium) && `no ${chromium}: apt-get install chromium` }, async () => {
  // A host's session: it prompts, and the echo agent asks to confirm.
  ws = new WebSocket(`ws://127.0.0.1:${kit.port}/`, ["glovebox.v1", "bearer." + kit.key]);
  const frames = [];
  const waiters = [];
  ws.on("message", (d) => {
    const f = JSON.parse(String(d));
    frames.push(f);
    for (const w of waiters.splice(0)) w();
  });
  const frame = (what, pred) => within(30000, what, new Promise((res) => {
    const look = () => {
      const f = frames.find(pred);
      if (f) res(f);
      else waiters.push(look);
    };
    look();
  }));
  const hello = await frame("the hello", (f) => f.type === "hello");
  const sid = hello.session_id;
  ws.send(JSON.stringify({ type: "prompt", id: "p-1", text: "watch the inspector", inputs: {} }));
  await frame("the slot push", (f) => f.type === "display_push");

  const { chromium: pw } = await import("playwright-core");
  profile = mkdtempSync(path.join(os.tmpdir(), "gbx-chromium-"));
  context = await within(60000, "Chromium to start", pw.launchPersistentContext(profile, {
    executablePath: chromium,
    headless: true,
    acceptDownloads: true,
    viewport: { width: 1280, height: 900 },
    args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking", "--disable-component-update", "--disable-sync"],
  }));
  const page = context.pages()[0] ?? (await context.newPage());
  const consoleLines = [];
  page.on("console", (m) => consoleLines.push(m.text()));
  page.on("pageerror", (e) => consoleLines.push(String(e)));
  const requests = [];
  page.on("request", (r) => requests.push(r.url()));
  const token = mintToken(kit.key, ["inspect"], 600);
  await page.goto(`${kit.http}/inspect/#token=${token}`);

  const sessionRow = page.locator(`#sessions li[data-session="${sid}"]`);
  await within(30000, "the session in the list", sessionRow.waitFor());
  assert.equal(await page.evaluate(() => location.hash), "", "the token stays in the address bar");
  await sessionRow.click();
  await within(30000, "the prompt's events", page.locator("#events li", { hasText: '"text":"inspector "' }).waitFor());
  await within(30000, "the prompt in the list", page.locator('#prompts li[data-prompt="p-1"]', { hasText: "watch the inspector" }).waitFor());
  const slot = page.locator(".slot");
  await within(30000, "the display slot", slot.waitFor());
  assert.match(await slot.textContent(), /Save the echo to echo\.txt\?/);

  // The page answers the slot; the host's session completes with the output.
  await slot.locator("button.resolve").click();
  const done = await frame("the prompt's complete", (f) => f.type === "complete" && f.id === "p-1");
  assert.equal(done.message, "echoed 3 words");
  assert.equal(done.outputs["echo.txt"]?.kind, "server");
  await within(30000, "the slot to leave the page", slot.waitFor({ state: "detached" }));
  await within(30000, "the prompt marked complete", page.locator('#prompts li[data-prompt="p-1"] .state.complete').waitFor());

  const link = page.locator('#outputs li[data-output="echo.txt"] a');
  await within(30000, "the output's link", link.waitFor());
  const [download] = await Promise.all([page.waitForEvent("download"), link.click()]);
  const saved = await within(30000, "the download", download.path());
  assert.equal(readFileSync(saved, "utf8"), "watch the inspector\n");

  await within(30000, "the isolation report", page.locator("#environment .layers span").first().waitFor());
  assert.match(await page.locator("#box").textContent(), /inspected 0\.3\.0/);
  assert.match(await page.locator("#environment-json").textContent(), /"isolation"/);

  // The token never went to the box in a URL.
  assert.ok(!requests.some((u) => u.includes(token)), `a request carried the token: ${requests.join("\n")}`);
  assert.ok(!consoleLines.some((l) => /Content Security Policy|Refused to/.test(l)), `CSP violations:\n${consoleLines.join("\n")}`);

  // A screenshot with content: not one flat colour, and dark text on the
  // light page over a good share of it.
  const png = await page.screenshot({ fullPage: false });
  if (process.env.INSPECT_SCREENSHOT) writeFileSync(process.env.INSPECT_SCREENSHOT, png);
  const img = decodePNG(png);
  const colours = new Set();
  let dark = 0;
  for (let i = 0; i < img.px.length; i += img.channels) {
    const [r, g, b] = [img.px[i], img.px[i + 1], img.px[i + 2]];
    colours.add((r << 16) | (g << 8) | b);
    if (r + g + b < 200) dark++;
  }
  const n = img.width * img.height;
  assert.ok(colours.size > 50, `the screenshot has ${colours.size} colours: blank?`);
  assert.ok(dark > n * 0.01 && dark < n * 0.9, `dark pixels ${dark} of ${n}: want text on a light page`);
  ws.close();
});
