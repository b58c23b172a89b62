// Display slots with examples/echo-agent, a Go agent that asks the client
// to confirm before it writes echo.txt.
import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import { GloveboxClient } from "@glovebox-dev/client";
import { collect, first, startKit, within } from "./helpers.mjs";

let kit;
let client;
before(async () => {
  kit = await startKit({ binary: "echo-agent", manifest: { agent: { type: "go" } }, env: { ECHO_AGENT_AS_MAIN: "1" } });
  client = GloveboxClient.make({ endpoints: { echo: { url: kit.url, key: kit.key } } });
});
after(async () => {
  await client?.close();
  await kit?.stop();
});

test("a slot pushed for the prompt is resolved; the agent writes its output", async () => {
  const r = client.box("echo").prompt("hello display slots");
  const pushed = [];
  const cleared = [];
  const displays = within(20000, "the display stream to end", (async () => {
    for await (const d of r.display) {
      if (d.type === "push") {
        pushed.push(d.slot);
        assert.equal(d.slot.renderer, "confirm");
        assert.match(d.slot.input.question, /Save the echo/);
        await r.resolve(d.slot.id, true);
      } else {
        cleared.push(d.slot_id);
      }
    }
  })());
  const events = await collect(r.events);
  assert.equal(events.map((e) => e.data.text).join(""), "hello display slots ");
  assert.equal(await within(20000, "the echo to complete", r.message), "echoed 3 words");
  await displays;
  assert.equal(pushed.length, 1);
  assert.deepEqual(cleared, [pushed[0].id]);
  assert.equal(await r.readText("echo.txt"), "hello display slots\n");
});

test("a rejected slot fails the prompt with the box's error", async () => {
  const r = client.box("echo").prompt("no thanks");
  const d = await first(r.display, "the confirm slot", (d) => d.type === "push");
  r.reject(d.slot.id, "the user said no"); // fire and forget
  const err = await within(20000, "the rejected prompt to fail", r.done.catch((e) => e));
  assert.equal(err.fromBox, true, String(err));
  assert.ok(err.code, "the error carries the box's code");
  assert.match(err.message, /the user said no/);
});

test("resolve() fails through onSendError and its promise when the box is closed", async () => {
  const c = GloveboxClient.make({ endpoints: { echo: { url: kit.url, key: kit.key } } });
  const box = c.box("echo");
  const r = box.prompt("x");
  const errs = [];
  box.onSendError((e, what) => errs.push([e.code, what]));
  await c.close();
  await assert.rejects(r.resolve("slot_1", true), { code: "Closed" });
  assert.deepEqual(errs, [["Closed", "resolve slot slot_1"]]);
});
