// The client against a v1-only box (test/v1server.mjs, written from the
// original's spec): no hello, no seq, no resume, untagged display frames.
import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import { ClientCodes, GloveboxClient } from "@glovebox-dev/client";
import { collect, newKey, within, first } from "./helpers.mjs";
import { startV1 } from "./v1server.mjs";

const key = newKey();
let v1;
let client;
before(async () => {
  v1 = await startV1({ key });
  client = GloveboxClient.make({ endpoints: { v1: { url: v1.url, key } }, keepaliveMs: 100 });
});
after(async () => {
  await client?.close();
  await v1?.close();
});

test("events, message, inputs, environment and health from a v1 box", async () => {
  const box = client.box("v1");
  const r = box.prompt("echo a b c");
  const events = await collect(r.events);
  assert.deepEqual(events.map((e) => e.data.text), ["a ", "b ", "c "]);
  assert.ok(events.every((e) => e.seq === undefined && e.request_id === r.id));
  assert.equal(await r.message, "a b c");
  assert.equal(box.sessionId, "");
  assert.equal(box.capabilities, undefined);
  const r2 = box.prompt("inputs", { files: { "x.txt": { bytes: "hello" } } });
  assert.equal(await r2.message, "x.txt:hello");
  const env = await box.environment();
  assert.equal(env.protocol_version, 1);
  assert.equal(env.capabilities, undefined);
  assert.deepEqual(await box.health(), { ok: true, name: "v1box", version: "1.0.0" });
});

test("inline and server outputs read with the bearer; consume deletes", async () => {
  const r = client.box("v1").prompt("files");
  assert.equal(await r.readText("small.txt"), "small");
  const big = await r.read("big.bin", { consume: true });
  assert.equal(big.length, 2 << 20);
  assert.ok(big.every((b) => b === 7));
  await assert.rejects(r.read("big.bin"), { code: ClientCodes.HTTP, status: 404 });
});

test("an untagged display slot goes to the prompt in flight; resolve answers it", async () => {
  const r = client.box("v1").prompt("ask proceed?");
  const push = await first(r.display, "the untagged slot", (d) => d.type === "push");
  assert.deepEqual(push.slot.input, { question: "proceed?" });
  r.resolve(push.slot.id, { ok: 1 });
  const clear = await first(r.display, "the slot's clear", (d) => d.type === "clear");
  assert.equal(clear.slot_id, push.slot.id);
  assert.equal(await within(10000, "the answered prompt", r.message), 'answer: {"ok":1}');
});

test("abort, a failing prompt and a keepalive period on a v1 box", async () => {
  const box = client.box("v1");
  const r = box.prompt("wait");
  await first(r.events, "the first event of r");
  await new Promise((res) => setTimeout(res, 350)); // pings and pongs go by
  r.abort();
  await assert.rejects(within(10000, "the aborted v1 prompt", r.done), { code: "AbortError", message: "This operation was aborted" });
  await assert.rejects(box.prompt("fail").done, (e) => e.code === "Error" && e.fromBox && e.message === "it failed");
});

test("a dropped socket fails the prompt with ConnectionLost (v1 has no resume); the next prompt reconnects", async () => {
  const box = client.box("v1");
  const r = box.prompt("drop");
  await assert.rejects(within(10000, "the dropped v1 prompt", r.done), (e) => e.code === ClientCodes.ConnectionLost && /does not support resume/.test(e.message));
  assert.equal(await within(10000, "a prompt on a new socket", box.prompt("echo back").message), "back");
});

test("a wrong key is refused", async () => {
  const c = GloveboxClient.make({ endpoints: { v1: { url: v1.url, key: "wrong" } } });
  const err = await c.box("v1").prompt("echo x").done.catch((e) => e);
  assert.ok([ClientCodes.Unauthorized, ClientCodes.ConnectionLost].includes(err.code), err.message);
  if (!globalThis.WebSocket) assert.equal(err.code, ClientCodes.Unauthorized);
  await assert.rejects(c.box("v1").environment(), { code: ClientCodes.Unauthorized });
  await c.close();
});
