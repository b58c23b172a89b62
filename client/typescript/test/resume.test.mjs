// Resume: a proxy between the client and the kit cuts the socket without a
// close frame while prompts run; the client redials, resumes the session and
// dedupes the replay by seq.
import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import { GloveboxClient } from "@glovebox-dev/client";
import { collect, cutProxy, startKit, streamText, within, first } from "./helpers.mjs";

let kit;
let proxy;
before(async () => {
  kit = await startKit();
  proxy = await cutProxy(kit.port);
});
after(async () => {
  await proxy?.close();
  await kit?.stop();
});

test("a prompt survives two cuts: every line once, in order, seq strictly increasing", async () => {
  const logs = [];
  const client = GloveboxClient.make({
    endpoints: { box: { url: proxy.url, key: kit.key } },
    reconnect: { attempts: 10, backoffMs: 50 },
    log: (msg) => logs.push(msg),
  });
  try {
    const box = client.box("box");
    const r = box.prompt("for i in $(seq 1 30); do echo $i; sleep 0.05; done");
    const events = [];
    await within(30000, "the prompt's events across two cuts", (async () => {
      for await (const e of r.events) {
        events.push(e);
        if (events.length === 5 || events.length === 15) proxy.cut();
      }
    })());
    assert.equal(proxy.cuts, 2);
    const lines = streamText(events).trim().split("\n").map(Number);
    assert.deepEqual(lines, Array.from({ length: 30 }, (_, i) => i + 1));
    const seqs = events.map((e) => e.seq);
    for (let i = 1; i < seqs.length; i++) assert.ok(seqs[i] > seqs[i - 1], `seq ${seqs[i]} after ${seqs[i - 1]}`);
    assert.equal((await r.message).split("\n").length, 31);
    assert.ok(logs.filter((m) => m === "session resumed").length >= 2, `resumed twice (log: ${logs.join("; ")})`);
    // The same session serves the next prompt.
    const session = box.sessionId;
    assert.equal(await within(10000, "a prompt after the resumes", box.prompt("echo again").message), "again\n");
    assert.equal(box.sessionId, session);
  } finally {
    await client.close();
  }
});

test("a prompt sent while the socket is cut goes out on the resumed socket", async () => {
  const client = GloveboxClient.make({ endpoints: { box: { url: proxy.url, key: kit.key } }, reconnect: { attempts: 10, backoffMs: 50 } });
  try {
    const box = client.box("box");
    const running = box.prompt("echo one; sleep 1; echo two");
    await first(running.events, "the running prompt's first output", (e) => e.event_type === "text_delta");
    proxy.cut();
    const second = box.prompt("echo second");
    assert.equal(await within(20000, "the running prompt to complete after the cut", running.message), "one\ntwo\n");
    assert.equal(await within(20000, "the prompt sent during the cut", second.message), "second\n");
  } finally {
    await client.close();
  }
});

test("keepalive notices a socket that silently stops delivering, and the session resumes on a new one", async () => {
  const logs = [];
  const client = GloveboxClient.make({
    endpoints: { box: { url: proxy.url, key: kit.key } },
    keepaliveMs: 100,
    reconnect: { attempts: 10, backoffMs: 50 },
    log: (msg) => logs.push(msg),
  });
  try {
    const r = client.box("box").prompt("for i in $(seq 1 20); do echo $i; sleep 0.05; done");
    const events = [];
    await within(30000, "the prompt's events across a frozen socket", (async () => {
      for await (const e of r.events) {
        events.push(e);
        if (events.length === 3) proxy.freeze();
      }
    })());
    assert.deepEqual(streamText(events).trim().split("\n").map(Number), Array.from({ length: 20 }, (_, i) => i + 1));
    assert.ok(logs.some((m) => /keepalive/.test(m)), `keepalive dropped the socket (log: ${logs.join("; ")})`);
    assert.ok(logs.includes("session resumed"), `the session resumed (log: ${logs.join("; ")})`);
  } finally {
    await client.close();
  }
});

test("without reconnect attempts, a cut fails the prompt with ConnectionLost", async () => {
  const client = GloveboxClient.make({ endpoints: { box: { url: proxy.url, key: kit.key } }, reconnect: { attempts: 0 } });
  try {
    const r = client.box("box").prompt("echo one; sleep 5");
    await first(r.events, "the first output of r", (e) => e.event_type === "text_delta");
    proxy.cut();
    await assert.rejects(within(10000, "the cut prompt to fail", r.done), { code: "ConnectionLost" });
    const events = await collect(r.events);
    assert.deepEqual(events, []);
  } finally {
    await client.close();
  }
});
