// Snapshots against the real kit: a session's files snapshotted, restored
// as a new session another Box attaches to, and forked.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { GloveboxClient } from "@glovebox-dev/client";
import { startKit, within } from "./helpers.mjs";

describe("snapshots (real kit)", () => {
  let kit, client;
  before(async () => {
    kit = await startKit();
    const ep = { url: kit.url, key: kit.key };
    client = new GloveboxClient({ endpoints: { src: ep, restored: ep, fork: ep } });
  });
  after(async () => {
    await client?.close();
    await kit?.stop();
  });

  const answer = async (box, text) => {
    const done = await within(30000, `the prompt ${text}`, box.prompt(text).done);
    return done.message.trim();
  };

  test("snapshot, restore, attach, fork, delete", async () => {
    const box = client.box("src");
    await answer(box, "mkdir d && printf kept > d/f && chmod 600 d/f && ln -s d/f l");
    const info = await box.snapshot();
    assert.equal(info.session, box.sessionId);
    assert.equal(info.entries, 3);
    const list = await box.snapshots();
    assert.deepEqual(list.snapshots.map((s) => s.id), [info.id]);
    const m = await box.snapshotManifest(info.id);
    assert.deepEqual(m.entries.map((e) => `${e.type} ${e.path}`), ["dir d", "file d/f", "symlink l"]);

    const res = await box.restore(info.id);
    const restored = client.box("restored");
    restored.attach(res.session);
    assert.equal(await answer(restored, "cat l; stat -c %a d/f"), "kept600");
    assert.equal(restored.sessionId, res.session);
    assert.throws(() => restored.attach("other"), /has a session already/);

    const fr = await box.fork(1);
    assert.equal(fr.sessions.length, 1);
    const fork = client.box("fork");
    fork.attach(fr.sessions[0]);
    assert.equal(await answer(fork, "cat d/f"), "kept");

    await box.deleteSnapshot(info.id);
    await assert.rejects(box.restore(info.id), /HTTP 404/);
    await assert.rejects(box.restore("nope"), /64 hex digits/);
  });
});
