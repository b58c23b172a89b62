// The client against the real kit built from this repository (exec agent).
import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { after, before, describe, test } from "node:test";
import { GloveboxClient, GloveboxError, ClientCodes } from "@glovebox-dev/client";
import { collect, mintToken, recordingWebSocket, startKit, streamText, within, first } from "./helpers.mjs";

const BaseWS = globalThis.WebSocket ?? (await import("ws")).WebSocket;

describe("against the kit (exec agent)", () => {
  let kit;
  let client;
  const seen = { sent: new Set(), received: new Set() };
  before(async () => {
    // No short limits.timeout here: a large output on a loaded machine
    // may take seconds. The timeout test has a kit of its own.
    kit = await startKit();
    client = GloveboxClient.make({
      endpoints: { box: { url: kit.url, key: kit.key } },
      WebSocket: recordingWebSocket(BaseWS, seen),
    });
  });
  after(async () => {
    await client?.close();
    await kit?.stop();
  });

  test("streams stdout and stderr as text_delta, then exit, in seq order; returns nested and inline outputs", async () => {
    const r = client.box("box").prompt('echo out; echo err >&2; mkdir -p "$GLOVEBOX_OUTPUT/sub"; printf nested > "$GLOVEBOX_OUTPUT/sub/a.txt"; cat "$GLOVEBOX_INPUT/in.txt"', {
      files: { "in.txt": { bytes: "from the client\n" } },
    });
    const events = await collect(r.events);
    assert.equal(streamText(events, "stdout"), "out\nfrom the client\n");
    assert.equal(streamText(events, "stderr"), "err\n");
    assert.deepEqual(events.at(-1).data, { code: 0 });
    assert.equal(events.at(-1).event_type, "exit");
    const seqs = events.map((e) => e.seq);
    assert.deepEqual(seqs, [...seqs].sort((a, b) => a - b), "events arrive in seq order");
    assert.ok(events.every((e) => e.request_id === r.id && e.id === r.id));
    assert.equal(await r.message, "out\nfrom the client\n");
    const outputs = await r.outputs;
    assert.deepEqual(Object.keys(outputs), ["sub/a.txt"]);
    assert.equal(outputs["sub/a.txt"].kind, "inline");
    assert.equal(await r.readText("sub/a.txt"), "nested");
    await assert.rejects(r.read("missing.txt"), (e) => e instanceof GloveboxError && e.code === ClientCodes.NoOutput && /sub\/a\.txt/.test(e.message));
  });

  test("a non-zero exit completes with an exit event by default, and fails with AgentError under execExitAsError", async () => {
    const box = client.box("box");
    const plain = box.prompt("echo partial; exit 3");
    const events = await collect(plain.events);
    assert.deepEqual(events.at(-1).data, { code: 3 });
    assert.equal(await plain.message, "partial\n");

    const strict = box.prompt("echo partial; exit 4", { execExitAsError: true });
    await assert.rejects(strict.done, (e) => {
      assert.equal(e.code, "AgentError");
      assert.equal(e.fromBox, true);
      assert.match(e.message, /exited with code 4/);
      assert.equal(e.completion.message, "partial\n");
      return true;
    });
    await assert.rejects(strict.message, { code: "AgentError" });
  });

  test("abort through a signal and through result.abort ends the prompt with AbortError", async () => {
    const box = client.box("box");
    const ac = new AbortController();
    const r1 = box.prompt("echo started; sleep 30", { signal: ac.signal });
    await first(r1.events, "the first output of r1", (e) => e.event_type === "text_delta");
    ac.abort();
    await assert.rejects(within(10000, "the signalled prompt to end", r1.done), { code: "AbortError" });

    const r2 = box.prompt("echo started; sleep 30");
    await first(r2.events, "the first output of r2", (e) => e.event_type === "text_delta");
    await r2.abort();
    await assert.rejects(within(10000, "the aborted prompt to end", r2.done), (e) => e.code === "AbortError" && e.fromBox);
    // The session goes on after both.
    const r3 = box.prompt("echo after");
    assert.equal(await within(10000, "a prompt after the aborts", r3.message), "after\n");
  });

  test("limits.timeout fails the prompt with TimeoutError from the box", async () => {
    const short = await startKit({ manifest: { limits: { timeout: "2s" } } });
    const c = GloveboxClient.make({ endpoints: { box: { url: short.url, key: short.key } }, WebSocket: recordingWebSocket(BaseWS, seen) });
    try {
      const r = c.box("box").prompt("sleep 20");
      await assert.rejects(within(15000, "the timed-out prompt to end", r.done), (e) => e.code === "TimeoutError" && e.fromBox);
    } finally {
      await c.close();
      await short.stop();
    }
  });

  test("an already-aborted signal fails the prompt before anything is sent", async () => {
    const r = client.box("box").prompt("echo never", { signal: AbortSignal.abort("no") });
    await assert.rejects(r.done, { code: "AbortError" });
    assert.deepEqual(await collect(r.events), []);
  });

  test("a large output comes back as a server ref and reads whole; a large stream of events arrives in order", async () => {
    const box = client.box("box");
    const r = box.prompt('head -c 5000000 /dev/urandom > "$GLOVEBOX_OUTPUT/big.bin"; sha256sum "$GLOVEBOX_OUTPUT/big.bin" | cut -d" " -f1; seq 1 20000');
    const events = await collect(r.events, 60000);
    const out = streamText(events);
    const lines = out.trim().split("\n");
    assert.equal(lines.length, 20001);
    assert.deepEqual(lines.slice(1).map(Number), Array.from({ length: 20000 }, (_, i) => i + 1));
    const outputs = await r.outputs;
    assert.equal(outputs["big.bin"].kind, "server");
    assert.equal(outputs["big.bin"].size, 5000000);
    const bytes = await within(30000, "the 5MB output", r.read("big.bin"));
    assert.equal(bytes.length, 5000000);
    assert.equal(createHash("sha256").update(bytes).digest("hex"), lines[0]);
    const again = await box.file(outputs["big.bin"].id, { consume: true });
    assert.equal(again.length, 5000000);
    await assert.rejects(box.file(outputs["big.bin"].id), (e) => e.code === ClientCodes.HTTP && (e.status === 404 || e.status === 410));
  });

  test("a large inline input reaches the command intact", async () => {
    const data = new Uint8Array(3 << 20);
    for (let i = 0; i < data.length; i++) data[i] = (i * 7919) & 0xff;
    const want = createHash("sha256").update(data).digest("hex");
    const r = client.box("box").prompt('sha256sum "$GLOVEBOX_INPUT/blob.bin" | cut -d" " -f1', { files: { "blob.bin": { bytes: data.buffer } } });
    assert.equal((await within(30000, "the hash of the input", r.message)).trim(), want);
  });

  test("environment() is cached and health() needs no key", async () => {
    const box = client.box("box");
    const [a, b] = await Promise.all([box.environment(), box.environment()]);
    assert.equal(a, b);
    assert.equal(a.name, "ts-test");
    assert.ok(a.capabilities.includes("resume"));
    assert.equal(await box.environment(), a);
    const h = await box.health();
    assert.deepEqual({ ok: h.ok, name: h.name }, { ok: true, name: "ts-test" });
  });

  test("keepalive pings get pongs, and every client and server message type has crossed the wire", async () => {
    const c = GloveboxClient.make({ endpoints: { box: { url: kit.url, key: kit.key } }, WebSocket: recordingWebSocket(BaseWS, seen), keepaliveMs: 200 });
    const r = c.box("box").prompt("sleep 1; echo done");
    assert.equal(await within(10000, "the prompt across keepalive pings", r.message), "done\n");
    await c.close();
    for (const t of ["hello", "prompt", "abort", "ping"]) assert.ok(seen.sent.has(t), `sent a ${t} frame (sent ${[...seen.sent]})`);
    for (const t of ["hello", "event", "complete", "error", "pong"]) assert.ok(seen.received.has(t), `received a ${t} frame (received ${[...seen.received]})`);
  });

  test("a wrong key is Unauthorized, and the failure settles every promise", async () => {
    const c = GloveboxClient.make({ endpoints: { bad: { url: kit.url, key: "wrong" } }, reconnect: { attempts: 0 } });
    const r = c.box("bad").prompt("echo no");
    const err = await r.done.catch((e) => e);
    assert.ok(err instanceof GloveboxError);
    if (!globalThis.WebSocket) assert.equal(err.code, ClientCodes.Unauthorized, err.message);
    await assert.rejects(c.box("bad").environment(), { code: ClientCodes.Unauthorized, status: 401 });
    await c.close();
  });

  test("bad options fail the result, not the caller", async () => {
    const r = client.box("box").prompt("x", { files: { "": { bytes: "a" } } });
    await assert.rejects(r.done, { code: ClientCodes.BadRequest });
    assert.throws(() => GloveboxClient.make({ endpoints: { x: { url: "ftp://h/", key: "k" } } }), /scheme must be ws, wss, http or https/);
    assert.throws(() => GloveboxClient.make({ endpoints: { x: { url: "ws://h/" } } }), /missing key or token/);
    assert.throws(() => client.box("nope"), /unknown box "nope"/);
  });

  test("close fails prompts in flight with Closed", async () => {
    const c = GloveboxClient.make({ endpoints: { box: { url: kit.url, key: kit.key } } });
    const r = c.box("box").prompt("echo started; sleep 30");
    await first(r.events, "the first output of r", (e) => e.event_type === "text_delta");
    await c.close();
    await assert.rejects(r.done, { code: ClientCodes.Closed });
    assert.throws(() => c.box("box"), { code: ClientCodes.Closed });
  });
});

describe("tokens", () => {
  let kit;
  before(async () => {
    kit = await startKit();
  });
  after(async () => kit?.stop());

  test("a connect token opens the socket but not /environment; a full token reads outputs and the environment", async () => {
    const connectOnly = mintToken(kit.key, { scope: "connect" });
    const c1 = GloveboxClient.make({ endpoints: { b: { url: kit.url, token: connectOnly } } });
    const r = c1.box("b").prompt('head -c 2000000 /dev/zero > "$GLOVEBOX_OUTPUT/z.bin"; echo ok');
    assert.equal(await within(20000, "a prompt with a connect token", r.message), "ok\n");
    await assert.rejects(c1.box("b").environment(), { code: ClientCodes.Unauthorized });
    await assert.rejects(r.read("z.bin"), { code: ClientCodes.Unauthorized });
    await c1.close();

    let minted = 0;
    const c2 = GloveboxClient.make({
      endpoints: { b: { url: kit.url, token: async () => (minted++, mintToken(kit.key)) } },
    });
    const r2 = c2.box("b").prompt('head -c 2000000 /dev/zero > "$GLOVEBOX_OUTPUT/z.bin"; echo ok');
    assert.equal((await within(20000, "a server output read with a token", r2.read("z.bin"))).length, 2000000);
    assert.equal((await c2.box("b").environment()).name, "ts-test");
    assert.ok(minted >= 3, `the token function is asked for every connection and request (asked ${minted} times)`);
    await c2.close();
  });

  test("an expired or foreign token is refused", async () => {
    for (const token of [mintToken(kit.key, { ttl: "1s" }), mintToken("some-other-key-entirely-0000000000")]) {
      if (token === undefined) continue;
      await new Promise((res) => setTimeout(res, 1100));
      const c = GloveboxClient.make({ endpoints: { b: { url: kit.url, token } }, reconnect: { attempts: 0 } });
      const r = c.box("b").prompt("echo no");
      const err = await within(20000, "a refused token to fail the prompt", r.done.catch((e) => e));
      assert.ok(err instanceof GloveboxError, String(err));
      if (!globalThis.WebSocket) assert.equal(err.code, ClientCodes.Unauthorized);
      await assert.rejects(c.box("b").environment(), { code: ClientCodes.Unauthorized });
      await c.close();
    }
  });
});
