// A kit that receives SIGTERM drains: the client hears it and its running
// prompt completes.
import assert from "node:assert/strict";
import { writeFileSync } from "node:fs";
import path from "node:path";
import { test } from "node:test";
import { GloveboxClient, GloveboxError } from "@glovebox-dev/client";
import { startKit, within } from "./helpers.mjs";

test("SIGTERM: onDraining fires, new prompts get Draining, the running prompt completes, the kit exits 0", async () => {
  const kit = await startKit({ manifest: { sessions: { drain: "2m" } } });
  let told;
  const heard = new Promise((res) => (told = res));
  const client = GloveboxClient.make({
    endpoints: { box: { url: kit.url, key: kit.key } },
    onDraining: (box, deadline) => told({ box, deadline }),
  });
  try {
    const box = client.box("box");
    const r = box.prompt('echo started; while [ ! -e go ]; do sleep 0.05; done; echo finished');
    const it = r.events[Symbol.asyncIterator]();
    for (;;) {
      const { value, done } = await within(30000, "the prompt's first event", it.next());
      assert.ok(!done, "the prompt ended before it started");
      if (JSON.stringify(value.data).includes("started")) break;
    }
    const sent = Date.now();
    kit.signal("SIGTERM");
    const d = await within(30000, "the onDraining callback", heard);
    assert.equal(d.box, "box");
    assert.ok(d.deadline >= sent + 60000, `deadline ${d.deadline} is not the 2m drain after ${sent}`);
    assert.equal(box.draining, d.deadline);
    await assert.rejects(box.prompt("echo never").done, (e) => e instanceof GloveboxError && e.code === "Draining");
    writeFileSync(path.join(kit.boxRoot, "work", box.sessionId, "go"), "");
    assert.equal(await within(30000, "the running prompt's message", r.message), "started\nfinished\n");
    const { code } = await within(30000, "the kit to exit after its drain", kit.exited);
    assert.equal(code, 0);
  } finally {
    await client.close();
    await kit.stop();
  }
});
