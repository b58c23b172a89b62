// Failures the caller never awaits must not become unhandled rejections
// (v1's client crashed Node when only one of message and outputs was handled).
import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import { GloveboxClient } from "@glovebox-dev/client";
import { freePort, startKit, within, first } from "./helpers.mjs";

const unhandled = [];
process.on("unhandledRejection", (e) => unhandled.push(e));

let kit;
before(async () => {
  kit = await startKit();
});
after(async () => kit?.stop());

test("failed prompts, sends and reads that nobody awaits leave no unhandled rejection", async () => {
  const deadPort = await freePort();
  const client = GloveboxClient.make({
    endpoints: {
      ok: { url: kit.url, key: kit.key },
      wrong: { url: kit.url, key: "wrong" },
      dead: { url: `ws://127.0.0.1:${deadPort}/`, key: "k" },
      failingToken: { url: kit.url, token: () => Promise.reject(new Error("token service down")) },
    },
    reconnect: { attempts: 0 },
  });
  const results = [
    client.box("wrong").prompt("echo a"),
    client.box("dead").prompt("echo a"),
    client.box("failingToken").prompt("echo a"),
    client.box("ok").prompt("exit 1", { execExitAsError: true }),
    client.box("ok").prompt("x", { files: { "": { bytes: "" } } }),
    client.box("ok").prompt("sleep 30", { signal: AbortSignal.timeout(200) }),
  ];
  const slow = client.box("ok").prompt("echo started; sleep 30");
  await first(slow.events, "the first event of slow");
  slow.abort();
  results.push(slow);
  // Only one of the two promises is handled here, as a v1 host might do.
  results[3].message.then(() => {}, () => {});
  await within(20000, "every prompt to end", (async () => {
    while (!results.every((r) => r.ended)) await new Promise((res) => setTimeout(res, 20));
  })());
  for (const r of results) assert.ok(r.error, `prompt ${r.id} failed`);
  assert.equal(results[2].error.code, "Unauthorized");
  assert.match(results[2].error.message, /the token function failed: token service down/);
  const closing = client.box("ok");
  const late = closing.prompt("sleep 30");
  await client.close();
  late.resolve("slot_9", true); // a send on a closed box, not awaited
  late.read("anything"); // a read of a failed prompt, not awaited
  await new Promise((res) => setTimeout(res, 200));
  assert.deepEqual(unhandled.map(String), []);
});
