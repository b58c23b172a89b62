// Run records against the real kit: fetched and verified with the box's
// key; a changed field, a dropped or reordered record and another box's
// key refused, saying what.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { GloveboxClient, RunVerifyError, verifyRun, verifyRunChain } from "@glovebox-dev/client";
import { startKit, within } from "./helpers.mjs";

describe("run records (real kit)", () => {
  let kit, client, box, key;
  before(async () => {
    kit = await startKit();
    client = new GloveboxClient({ endpoints: { box: { url: kit.url, key: kit.key } } });
    box = client.box("box");
    for (const text of ["echo one", `printf abc > "$GLOVEBOX_OUTPUT/x.txt"`, "exit 3"]) {
      await within(30000, `the prompt ${text}`, box.prompt(text).done.catch(() => {}));
    }
    key = (await box.environment()).runs.public_key;
  });
  after(async () => {
    await client?.close();
    await kit?.stop();
  });

  test("the chain and one record verify", async () => {
    const recs = await box.runChain();
    assert.equal(recs.length, 3);
    assert.deepEqual(recs.map((s) => s.record.seq), [1, 2, 3]);
    assert.deepEqual(recs[1].record.outputs["x.txt"], { sha256: "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad", size: 3 });
    const one = await box.run(recs[0].record.prompt, { publicKey: key });
    assert.equal(one.digest, recs[0].digest);
  });

  test("tampering is refused and named", async () => {
    const recs = await box.runChain();
    const changed = structuredClone(recs[1]);
    changed.record.outputs["x.txt"].sha256 = "00".repeat(32);
    await assert.rejects(verifyRun(changed, key), (e) => e instanceof RunVerifyError && e.fields.join() === "outputs/x.txt");
    await assert.rejects(verifyRunChain([recs[0], recs[2]], key), (e) => e instanceof RunVerifyError && e.at === 2 && /missing/.test(e.message));
    await assert.rejects(verifyRunChain([recs[1], recs[0]], key), (e) => e instanceof RunVerifyError && e.at === 1);
    const other = (await startOtherKey());
    await assert.rejects(verifyRun(recs[0], other), /another key/);
    await assert.rejects(box.runChain({ publicKey: other }), /another key/);
  });
});

/** Another box's run record key: a fresh ed25519 public key. */
async function startOtherKey() {
  const pair = await crypto.subtle.generateKey({ name: "Ed25519" }, true, ["sign", "verify"]);
  const raw = new Uint8Array(await crypto.subtle.exportKey("raw", pair.publicKey));
  return Buffer.from(raw).toString("base64");
}
