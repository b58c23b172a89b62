// The kit's inspector end to end: a real kit (./agent here, built with go
// build: the echo agent plus coloured output, exit statuses and fetches
// through the egress proxy) with the inspector on, real WebSocket sessions
// prompting it, and the page in headless Chromium (Debian's, driven by
// playwright-core; no browser is downloaded) following them: the output
// as a terminal shows it, the display slot answered, the output
// downloaded, the egress table, the timeline, the box at a glance, the
// session kept in the history once it ends, a running and a queued prompt
// aborted from the page, a terminal into a live session (with the key;
// an inspect token gets none); screenshots of each view are
// checked for content (INSPECT_SCREENSHOTS=DIR keeps them). Then a
// session of 100,000 events, with the page's frame time measured.
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
let page;
const consoleLines = [];
const requests = [];
const skip = !existsSync(chromium) && `no ${chromium}: apt-get install chromium`;

before(async () => {
  root = mkdtempSync(path.join(os.tmpdir(), "gbx-inspect-"));
  const bin = path.join(root, "agent");
  execFileSync("go", ["build", "-o", bin, "./kit/inspect/testdata/agent"], { cwd: repo, stdio: "inherit" });
  const key = randomBytes(32).toString("base64url");
  const manifest = {
    name: "inspected", version: "0.3.0", agent: { type: "go" }, inspect: { enabled: true }, key_fingerprint: fingerprint(key),
    packages: { nix: ["coreutils", "git"], pip: ["requests"] },
    network: { default: "deny", allow: ["api.example.com"] },
    // The agent runs in the kit, outside any network namespace: it reaches
    // the egress proxy on loopback, so the box serves without that layer.
    sandbox: { network: false, allow_degraded: true },
    limits: { memory: "128MB" },
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
  if (skip) return;
  const { chromium: pw } = await import("playwright-core");
  profile = mkdtempSync(path.join(os.tmpdir(), "gbx-chromium-"));
  context = await within(60000, "Chromium to start", pw.launchPersistentContext(profile, {
    executablePath: chromium,
    headless: true,
    acceptDownloads: true,
    viewport: { width: 1400, height: 1000 },
    args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking", "--disable-component-update", "--disable-sync"],
  }));
  page = context.pages()[0] ?? (await context.newPage());
  page.on("console", (m) => consoleLines.push(`${m.type()}: ${m.text()}`));
  page.on("pageerror", (e) => consoleLines.push(`pageerror: ${e}`));
  page.on("request", (r) => requests.push(r.url()));
});

after(async () => {
  if (consoleLines.length) console.log("the page's console:\n" + consoleLines.join("\n"));
  await context?.close();
  if (profile) rmSync(profile, { recursive: true, force: true });
  if (kit) {
    kit.child.kill("SIGTERM");
    await within(15000, "the kit to exit", kit.exited);
  }
  if (root) rmSync(root, { recursive: true, force: true });
});

/** A host's session on the kit: its frames, and a wait for one. */
async function session() {
  const ws = new WebSocket(`ws://127.0.0.1:${kit.port}/`, ["glovebox.v1", "bearer." + kit.key]);
  const frames = [];
  const waiters = [];
  let count = 0;
  ws.on("message", (d) => {
    count++;
    const f = JSON.parse(String(d));
    if (f.type !== "event") frames.push(f); // a flood's events are counted, not kept
    for (const w of waiters.splice(0)) w();
  });
  const frame = (what, pred, ms = 30000) => within(ms, what, new Promise((res) => {
    const look = () => {
      const f = frames.find(pred);
      if (f) res(f);
      else waiters.push(look);
    };
    look();
  }));
  const hello = await frame("the hello", (f) => f.type === "hello");
  const prompt = (id, text) => ws.send(JSON.stringify({ type: "prompt", id, text, inputs: {} }));
  return { ws, frame, prompt, sid: hello.session_id, count: () => count };
}

/** Checks a screenshot has content (not one flat colour, some dark text)
 * and keeps it under INSPECT_SCREENSHOTS when that is set. */
async function screenshot(name) {
  const png = await page.screenshot({ fullPage: false });
  if (process.env.INSPECT_SCREENSHOTS) writeFileSync(path.join(process.env.INSPECT_SCREENSHOTS, name + ".png"), png);
  const img = decodePNG(png);
  const colours = new Set();
  let dark = 0;
  for (let i = 0; i < img.px.length; i += img.channels) {
    const [r, g, b] = [img.px[i], img.px[i + 1], img.px[i + 2]];
    colours.add((r << 16) | (g << 8) | b);
    if (r + g + b < 200) dark++;
  }
  const n = img.width * img.height;
  assert.ok(colours.size > 50, `${name}: the screenshot has ${colours.size} colours: blank?`);
  assert.ok(dark > n * 0.01 && dark < n * 0.9, `${name}: dark pixels ${dark} of ${n}: want text on a light page`);
}

const tab = (name) => page.locator(`#tabs button[data-tab="${name}"]`).click();

test("the inspector follows a live session and keeps it once it ends", { skip }, async () => {
  const s = await session();
  s.prompt("p-1", "watch the inspector");
  await s.frame("the slot push", (f) => f.type === "display_push");

  const token = mintToken(kit.key, ["inspect"], 600);
  await page.goto(`${kit.http}/inspect/#token=${token}`);
  const sessionRow = page.locator(`#sessions li[data-session="${s.sid}"]`);
  await within(30000, "the session in the list", sessionRow.waitFor());
  assert.equal(await page.evaluate(() => location.hash), "", "the token stays in the address bar");
  await sessionRow.click();

  // The output as a terminal shows it, and the raw events a click away.
  await within(30000, "the prompt's output", page.locator("#terminal .line", { hasText: "watch the inspector" }).last().waitFor());
  await within(30000, "the prompt in the list", page.locator('#prompts [data-prompt="p-1"]', { hasText: "watch the inspector" }).waitFor());
  const slot = page.locator(".slot");
  await within(30000, "the display slot", slot.waitFor());
  assert.match(await slot.textContent(), /Save the echo to echo\.txt\?/);
  await screenshot("live-session");
  await tab("raw");
  await within(30000, "the raw events", page.locator("#events .line", { hasText: '"text":"inspector "' }).waitFor());
  await tab("output");

  // The page answers the slot; the host's session completes with the output.
  await slot.locator("button.resolve").click();
  const done = await s.frame("the prompt's complete", (f) => f.type === "complete" && f.id === "p-1");
  assert.equal(done.message, "echoed 3 words");
  assert.equal(done.outputs["echo.txt"]?.kind, "server");
  await within(30000, "the slot to leave the page", slot.waitFor({ state: "detached" }));
  await within(30000, "the prompt marked complete", page.locator('#prompts [data-prompt="p-1"] .state.complete').waitFor());

  // stderr is marked, ANSI colours are drawn, the exit status is shown.
  s.prompt("p-2", "exit 3");
  await s.frame("p-2's complete", (f) => f.type === "complete" && f.id === "p-2");
  const errLine = page.locator("#terminal .line.err", { hasText: "fatal: something went wrong" });
  await within(30000, "the stderr line", errLine.waitFor());
  assert.equal(await errLine.locator("span.f1", { hasText: "fatal:" }).count(), 1, "fatal: is not drawn red");
  assert.ok(!(await errLine.textContent()).includes("\x1b"), "an escape sequence reached the page");
  await within(30000, "p-2's exit status", page.locator('#prompts [data-prompt="p-2"] .exit', { hasText: "3" }).waitFor());

  // Resources: the session's cgroup sampled while a command runs in it,
  // drawn as charts; then a command the memory limit stops.
  s.prompt("p-hog", "hog 8 24");
  await within(30000, "the memory chart", page.locator('#resources [data-chart="memory"] svg polyline').waitFor());
  await within(30000, "a sample of the command running", page.waitForFunction(() => {
    const rs = current()?.resources || [];
    return rs.length >= 2 && rs.some((r) => r.mem >= 20 << 20 && r.procs >= 2);
  }, null, { timeout: 30000 }));
  assert.match(await page.locator('#resources [data-chart="memory"]').textContent(), / of 128\.0 MiB/);
  assert.match(await page.locator('#resources [data-chart="processes"]').textContent(), / of 512/);
  assert.match(await page.locator("#totals").textContent(), /1 live session\(s\) · now /);
  await screenshot("charts");
  await s.frame("p-hog's complete", (f) => f.type === "complete" && f.id === "p-hog");
  s.prompt("p-oom", "hog 2 400");
  await s.frame("p-oom's complete", (f) => f.type === "complete" && f.id === "p-oom");
  await within(30000, "the limit that stopped p-oom", page.locator('#prompts [data-prompt="p-oom"] .limit', { hasText: "memory" }).waitFor());

  // Egress: the session's connections, the blocked ones with the line
  // that would allow them. No name is resolved: the policy denies both.
  s.prompt("p-3", "fetch http://blocked.example/ http://other.example:8080/x");
  await s.frame("p-3's complete", (f) => f.type === "complete" && f.id === "p-3");
  await tab("egress");
  const blocked = page.locator('#egress tr[data-host="blocked.example"]');
  await within(30000, "the blocked connection", blocked.waitFor());
  assert.match(await blocked.textContent(), /blocked/);
  assert.match(await blocked.textContent(), /allow = \["blocked\.example"\]/);
  assert.match(await page.locator('#egress tr[data-host="other.example"]').textContent(), /allow = \["other\.example:8080"\]/);
  await within(30000, "the egress on the timeline", page.locator("#timeline rect.e.deny").first().waitFor());
  await screenshot("egress");
  await tab("outputs");
  const link = page.locator('#outputs li[data-output="echo.txt"] a');
  await within(30000, "the output's link", link.waitFor());
  const [download] = await Promise.all([page.waitForEvent("download"), link.click()]);
  const saved = await within(30000, "the download", download.path());
  assert.equal(readFileSync(saved, "utf8"), "watch the inspector\n");
  await tab("output");

  // The box at a glance, its JSON behind a toggle.
  await within(30000, "the isolation layers", page.locator("#environment .layers span").first().waitFor());
  assert.match(await page.locator("#box").textContent(), /inspected 0\.3\.0/);
  const glance = await page.locator("#environment dl.glance").textContent();
  for (const want of [/Packages/, /coreutils/, /requests/, /default deny/, /api\.example\.com/, /Warm pool/, /protocol 1/]) {
    assert.match(glance, want);
  }
  assert.ok(!(await page.locator("#environment-json").isVisible()), "the JSON shows without the toggle");
  assert.match(await page.locator("#environment-json").textContent(), /"isolation"/);

  // The session ends: it stays listable, its prompts with their outcomes.
  s.ws.close();
  const ended = page.locator(`#history li[data-session="${s.sid}"]`);
  await within(30000, "the ended session in the history", ended.waitFor());
  await ended.click();
  await within(30000, "the title to say ended", page.locator("#session-title", { hasText: "(ended)" }).waitFor());
  for (const [id, state] of [["p-1", "complete"], ["p-2", "complete"], ["p-hog", "complete"], ["p-oom", "complete"], ["p-3", "complete"]]) {
    await within(30000, `${id} ${state} in the history`, page.locator(`#prompts [data-prompt="${id}"] .state.${state}`).waitFor());
  }
  assert.equal(await page.locator("#prompts .state.running").count(), 0, "a prompt of an ended session is still running");
  assert.equal(await page.locator('#prompts [data-prompt="p-1"] .outs a', { hasText: "echo.txt" }).count(), 1);
  assert.ok(await page.locator("#timeline rect.p").count() >= 5, "the timeline lacks the prompts");
  assert.match(await page.locator("#resources .peaks").textContent(), /peak memory .*MiB of 128\.0 MiB/);
  assert.equal(await page.locator(`#box-timeline rect[data-session="${s.sid}"]`).count(), 1, "the session is not on the box's timeline");
  await screenshot("ended-session");

  // The token never went to the box in a URL, and the page logged no error.
  assert.ok(!requests.some((u) => u.includes(token)), `a request carried the token: ${requests.join("\n")}`);
  const bad = consoleLines.filter((l) => /^(error|pageerror)|Content Security Policy|Refused to/.test(l));
  assert.deepEqual(bad, [], `the page's console:\n${consoleLines.join("\n")}`);
});

test("the page aborts a running prompt and a queued one", { skip }, async () => {
  const s = await session();
  s.prompt("long", "sleep 30");
  s.prompt("next", "sleep 30");
  const row = (id) => page.locator(`#prompts [data-prompt="${id}"]`);
  const item = page.locator(`#sessions li[data-session="${s.sid}"]`);
  await within(30000, "the session in the list", item.waitFor());
  await item.click();
  await within(30000, "the long prompt running", row("long").locator(".state.running").waitFor());
  await within(30000, "the next prompt queued", row("next").locator(".state.queued").waitFor());

  // The queued one: Abort asks first, inline; "no" leaves it be.
  await row("next").locator("button.abort").click();
  await within(30000, "the question", row("next").locator(".abort.confirm", { hasText: "Abort this prompt?" }).waitFor());
  await row("next").locator("button.abort-no").click();
  await within(30000, "the Abort button back", row("next").locator("button.abort", { hasText: "Abort" }).waitFor());
  assert.equal(await row("next").locator(".state.queued").count(), 1, "the queued prompt changed after no");
  await row("next").locator("button.abort").click();
  await row("next").locator("button.abort-yes").click();
  const next = await s.frame("the queued prompt's AbortError", (f) => f.id === "next" && (f.type === "error" || f.type === "complete"));
  assert.equal(next.type, "error");
  assert.equal(next.error.code, "AbortError");
  await within(30000, "the queued prompt shown aborted", row("next").locator(".state.error", { hasText: "AbortError" }).waitFor());
  assert.ok(await row("next").locator("button.abort").isDisabled(), "Abort is enabled on an ended prompt");
  assert.equal(await row("long").locator(".state.running").count(), 1, "the running prompt stopped with the queued one");

  // The running one: its sleep is stopped long before its 30 seconds.
  await row("long").locator("button.abort").click();
  await row("long").locator("button.abort-yes").click();
  const long = await s.frame("the running prompt's AbortError", (f) => f.id === "long" && (f.type === "error" || f.type === "complete"), 20000);
  assert.equal(long.type, "error");
  assert.equal(long.error.code, "AbortError");
  await within(30000, "the running prompt shown aborted", row("long").locator(".state.error", { hasText: "AbortError" }).waitFor());
  assert.ok(await row("long").locator("button.abort").isDisabled(), "Abort is enabled on an ended prompt");
  await screenshot("aborted");

  // The session goes on.
  s.prompt("after", "exit 0");
  await s.frame("a prompt after the aborts", (f) => f.type === "complete" && f.id === "after");
  s.ws.close();
  const bad = consoleLines.filter((l) => /^(error|pageerror)|Content Security Policy|Refused to/.test(l));
  assert.deepEqual(bad, [], `the page's console:\n${consoleLines.join("\n")}`);
});

test("a terminal in the inspector, for a login that may have a shell", { skip }, async () => {
  const s = await session();
  const item = page.locator(`#sessions li[data-session="${s.sid}"]`);
  const button = page.locator("#open-shell");

  // An inspect token reads the session but gets no shell: no button, and
  // the box refuses the page's request anyway.
  await page.goto("about:blank");
  await page.goto(`${kit.http}/inspect/#token=${mintToken(kit.key, ["inspect"], 600)}`);
  await within(30000, "the session in the list", item.waitFor());
  await item.click();
  await within(30000, "the session's pane", page.locator("#session-title", { hasText: s.sid }).waitFor());
  assert.equal(await page.evaluate(() => state.terminals), false, "an inspect token's login may open terminals");
  assert.ok(!(await button.isVisible()), "an inspect token's login shows the Terminal button");
  // (page.request carries the page's cookie, and logs nothing on its console)
  const refused = await page.request.post(`${kit.http}/inspect/api/sessions/${s.sid}/terminals`, { headers: { "X-Glovebox-Inspect": "1" }, data: "{}" });
  assert.equal(refused.status(), 403, "the box opened a terminal for an inspect token's cookie");

  // The key: the button opens a shell in the session.
  await page.goto("about:blank");
  await page.goto(`${kit.http}/inspect/#token=${kit.key}`);
  await within(30000, "the session in the list", item.waitFor());
  await item.click();
  await within(30000, "the Terminal button", button.waitFor({ state: "visible" }));
  await button.click();
  const shell = page.locator(`#shells .shell[data-session="${s.sid}"]`);
  await within(30000, "the terminal's pane", shell.waitFor());
  const key = await shell.getAttribute("data-shell");
  const first = page.locator(`[data-shell="${key}"]`);
  await within(30000, "the terminal to connect", first.locator(".shell-state", { hasText: "connected" }).waitFor());
  const tid = key.split("/")[1];
  /** Waits for a row of the terminal's screen that reads text. */
  const row = (text) => within(30000, `"${text}" on the terminal`, page.waitForFunction(([k, t]) =>
    [...document.querySelectorAll(`[data-shell="${k}"] .xterm-rows > div`)].some((d) => d.textContent.trim() === t), [key, text], { timeout: 30000 }));
  await first.locator(".xterm").click();
  await page.keyboard.type("echo hi");
  await page.keyboard.press("Enter");
  await row("hi");
  // xterm.js's styles reached the page under its CSP: the rows are drawn
  // in the theme's colour.
  assert.equal(await first.locator(".xterm-rows").evaluate((e) => getComputedStyle(e).color), "rgb(215, 220, 229)");

  // The terminal resizes with its pane, and the shell sees the new size.
  const size = () => page.evaluate((k) => { const t = shells.get(k).term; return [t.rows, t.cols]; }, key);
  const [rows0, cols0] = await size();
  await page.keyboard.type("stty size");
  await page.keyboard.press("Enter");
  await row(`${rows0} ${cols0}`);
  await page.setViewportSize({ width: 1000, height: 1000 });
  await within(30000, "the terminal to narrow with its pane", page.waitForFunction(([k, c]) => shells.get(k).term.cols < c, [key, cols0], { timeout: 30000 }));
  const [rows1, cols1] = await size();
  await page.keyboard.type("clear; stty size");
  await page.keyboard.press("Enter");
  await row(`${rows1} ${cols1}`);
  await page.setViewportSize({ width: 1400, height: 1000 });

  // A second one at once, its own shell.
  await button.click();
  await within(30000, "the second terminal", page.locator(`#shells .shell[data-session="${s.sid}"]`).nth(1).waitFor());
  const second = page.locator(`#shells .shell[data-session="${s.sid}"]`).nth(1);
  await within(30000, "the second terminal to connect", second.locator(".shell-state", { hasText: "connected" }).waitFor());
  const key2 = await second.getAttribute("data-shell");
  assert.notEqual(key2, key);
  await screenshot("terminals");

  // Close ends the first: its pane goes, the box kills its shell.
  await first.locator("button.close-shell").click();
  await within(30000, "the pane to go", page.locator(`[data-shell="${key}"]`).waitFor({ state: "detached" }));
  const list = async () => (await fetch(`${kit.http}/sessions/${s.sid}/terminals`, { headers: { Authorization: "Bearer " + kit.key } })).json();
  await within(30000, "the closed terminal to end", (async () => {
    for (;;) {
      const t = (await list()).find((t) => t.id === tid);
      if (!t || t.state === "exited") return;
      await new Promise((r) => setTimeout(r, 100));
    }
  })());

  // The session ends: the second terminal says so, and closes quietly.
  s.ws.close();
  await within(30000, "the second terminal to end with its session", page.locator(`[data-shell="${key2}"].ended`).waitFor());
  await page.locator(`[data-shell="${key2}"] button.close-shell`).click();
  await within(30000, "the shells pane to hide", page.locator("#shells").waitFor({ state: "hidden" }));

  // Leaving the page kills the terminals it holds open.
  const s2 = await session();
  const item2 = page.locator(`#sessions li[data-session="${s2.sid}"]`);
  await within(30000, "the second session in the list", item2.waitFor());
  await item2.click();
  await button.click();
  const third = page.locator(`#shells .shell[data-session="${s2.sid}"]`);
  await within(30000, "a terminal in the second session", third.locator(".shell-state", { hasText: "connected" }).waitFor());
  const tid3 = (await third.getAttribute("data-shell")).split("/")[1];
  await page.goto("about:blank");
  await within(30000, "the page's terminal to end as it left", (async () => {
    for (;;) {
      const r = await fetch(`${kit.http}/sessions/${s2.sid}/terminals`, { headers: { Authorization: "Bearer " + kit.key } });
      const t = (await r.json()).find((t) => t.id === tid3);
      if (!t || t.state === "exited") return;
      await new Promise((r) => setTimeout(r, 100));
    }
  })());
  s2.ws.close();
  // Back to the page, for the tests after this one.
  await page.goto(`${kit.http}/inspect/`);
  await within(30000, "the page again", page.locator("#main").waitFor({ state: "visible" }));
  const bad = consoleLines.filter((l) => /^(error|pageerror)|Content Security Policy|Refused to/.test(l));
  assert.deepEqual(bad, [], `the page's console:\n${consoleLines.join("\n")}`);
});

test("the page stays responsive under a session of 100,000 events", { skip }, async (t) => {
  const s = await session();
  await within(30000, "the session in the list", page.locator(`#sessions li[data-session="${s.sid}"]`).waitFor());
  await page.locator(`#sessions li[data-session="${s.sid}"]`).click();
  // Frame times, measured in the page with requestAnimationFrame.
  await page.evaluate(() => {
    window.frameTimes = [];
    let last = performance.now();
    const tick = (now) => {
      window.frameTimes.push(now - last);
      last = now;
      if (!window.stopFrames) requestAnimationFrame(tick);
    };
    requestAnimationFrame(tick);
  });
  const t0 = Date.now();
  s.prompt("flood", "flood 100000");
  await s.frame("the flood's complete", (f) => f.type === "complete" && f.id === "flood", 180000);
  const sent = Date.now() - t0;
  await within(60000, "the flood's last line on the page", page.locator("#terminal .line", { hasText: "line 99999 on stderr" }).waitFor());
  const times = await page.evaluate(() => { window.stopFrames = true; return window.frameTimes; });
  const got = await page.evaluate(() => ({ lines: state.views.get(state.selected).lines.length, raw: state.views.get(state.selected).raw.length, dom: document.querySelectorAll("#terminal .line").length }));
  times.sort((a, b) => a - b);
  const pct = (p) => times[Math.min(times.length - 1, Math.floor(times.length * p))].toFixed(1);
  const mean = (times.reduce((a, b) => a + b, 0) / times.length).toFixed(1);
  const report = `100000 events sent in ${sent} ms; ${times.length} frames: mean ${mean} ms, median ${pct(0.5)} ms, p95 ${pct(0.95)} ms, p99 ${pct(0.99)} ms, max ${pct(1)} ms; page kept ${got.lines} terminal lines and ${got.raw} raw events, drew ${got.dom} line elements`;
  t.diagnostic(report);
  console.log(report);
  assert.ok(got.dom < 200, `the terminal drew ${got.dom} lines: not virtualised`);
  await screenshot("flood");
  s.ws.close();

  // The box keeps a session's latest frames only, so a page may miss some
  // of a fast flood: the page's own cost is measured with all 100,000
  // handed to it, in bursts of 1,000 as its event stream delivers them,
  // then with the terminal scrolled through them.
  const own = await page.evaluate(() => new Promise((resolve) => {
    select("synthetic-100k");
    const v = view("synthetic-100k");
    const times = [];
    let last = performance.now(), done = false, i = 0;
    const tick = (now) => {
      times.push(now - last);
      last = now;
      if (!done) requestAnimationFrame(tick);
    };
    requestAnimationFrame(tick);
    const t0 = performance.now();
    const burst = () => {
      for (const end = i + 1000; i < end; i++) {
        const d = i % 10 === 9 ? { text: `\x1b[1;31mwarn\x1b[0m line ${i} on stderr\n`, stream: "stderr" } : { text: `\x1b[32mok\x1b[0m line ${i} \x1b[38;5;208mamber\x1b[0m\n`, stream: "stdout" };
        const f = { type: "event", id: "synthetic", event_type: "text_delta", data: d, seq: i + 1 };
        frame(v, f, JSON.stringify(f));
      }
      if (i < 100000) return setTimeout(burst, 0);
      const fed = performance.now() - t0;
      // Then scroll from the top to the bottom in 60 steps.
      const term = document.getElementById("terminal");
      let step = 0;
      const scroll = () => {
        term.scrollTop = (term.scrollHeight * step) / 60;
        if (++step <= 60) return requestAnimationFrame(scroll);
        done = true;
        resolve({ fed, times, lines: v.lines.length, dom: term.querySelectorAll(".line").length });
      };
      requestAnimationFrame(scroll);
    };
    burst();
  }));
  const ft = own.times.sort((a, b) => a - b);
  const q = (p) => ft[Math.min(ft.length - 1, Math.floor(ft.length * p))].toFixed(1);
  const ownReport = `the page fed 100000 frames in ${own.fed.toFixed(0)} ms and scrolled through ${own.lines} lines: ${ft.length} frames, median ${q(0.5)} ms, p95 ${q(0.95)} ms, p99 ${q(0.99)} ms, max ${q(1)} ms; ${own.dom} line elements drawn`;
  t.diagnostic(ownReport);
  console.log(ownReport);
  assert.ok(own.lines >= 100000, `the terminal kept ${own.lines} lines of 100000`);
  assert.ok(own.dom < 200, `the terminal drew ${own.dom} lines: not virtualised`);
  const bad = consoleLines.filter((l) => /^(error|pageerror)|Content Security Policy|Refused to/.test(l));
  assert.deepEqual(bad, [], `the page's console:\n${consoleLines.join("\n")}`);
});
