// A session's files against the real kit: written, read (a range too),
// listed, stat'ed, moved, removed and watched, through Box.fs; odd paths
// refused before they are sent.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { GloveboxClient, GloveboxError, parseFsPath } from "@glovebox-dev/client";
import { startKit, within } from "./helpers.mjs";

test("parseFsPath refuses what leaves a root", () => {
  assert.deepEqual(parseFsPath("work/a/b.txt"), { root: "work", rel: "a/b.txt" });
  assert.deepEqual(parseFsPath("output/"), { root: "output", rel: "" });
  for (const bad of ["", "/work", "tmp/x", "work/../x", "work//x", "work/a\\b", "work/a\nb", "work/" + "a".repeat(256)]) {
    assert.throws(() => parseFsPath(bad), GloveboxError, bad);
  }
});

describe("a session's files (real kit)", () => {
  let kit, client, box, fs;
  before(async () => {
    kit = await startKit();
    client = new GloveboxClient({ endpoints: { box: { url: kit.url, key: kit.key } } });
    box = client.box("box");
    await within(30000, "a first prompt", box.prompt("mkdir d").done);
    fs = box.fs();
  });
  after(async () => {
    await client?.close();
    await kit?.stop();
  });

  test("write, read, a range, stat, list, move, remove", async () => {
    const e = await fs.write("work/d/a.txt", "hello, world");
    assert.equal(e.path, "work/d/a.txt");
    assert.equal(e.size, 12);
    assert.equal(new TextDecoder().decode(await fs.read("work/d/a.txt")), "hello, world");
    assert.equal(new TextDecoder().decode(await fs.read("work/d/a.txt", { offset: 7, length: 5 })), "world");
    assert.equal((await fs.stat("work/d")).type, "dir");
    const names = [];
    for await (const x of fs.listAll("work/d")) names.push(x.name);
    assert.deepEqual(names, ["a.txt"]);
    const r = await box.prompt("cat d/a.txt").done;
    assert.equal(r.message, "hello, world");
    await fs.move("work/d/a.txt", "output/b.txt");
    await assert.rejects(fs.read("work/d/a.txt"), (err) => err instanceof GloveboxError && err.status === 404 && /work\/d\/a\.txt/.test(err.message));
    await fs.remove("output/b.txt");
    await assert.rejects(fs.read("work/../etc/passwd"), (err) => err instanceof GloveboxError && /"\.\." name/.test(err.message));
  });

  test("a streamed write, and a watch sees the agent's files", async () => {
    const chunks = [new Uint8Array(1 << 16).fill(1), new Uint8Array(1 << 16).fill(2)];
    const body = new ReadableStream({ pull(c) { const x = chunks.shift(); x ? c.enqueue(x) : c.close(); } });
    assert.equal((await fs.write("work/streamed.bin", body)).size, 1 << 17);

    const ac = new AbortController();
    const events = await fs.watch("work", { signal: ac.signal });
    const seen = [];
    const reading = (async () => {
      for await (const ev of events) {
        seen.push(`${ev.type} ${ev.path}`);
        if (ev.type === "remove") break;
      }
    })();
    await box.prompt("echo x > w.txt; rm w.txt").done;
    await within(30000, "the watch's events", reading);
    ac.abort();
    assert.deepEqual(seen, ["create work/w.txt", "write work/w.txt", "remove work/w.txt"]);
  });
});
