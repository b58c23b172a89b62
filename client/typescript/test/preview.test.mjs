// Preview links against the real kit: a server a session runs is reached
// through its link, listed without the link, revoked (410 from then on).
import assert from "node:assert/strict";
import http from "node:http";
import { after, before, describe, test } from "node:test";
import { GloveboxClient } from "@glovebox-dev/client";
import { first, startKit, within } from "./helpers.mjs";

/** GETs the box's URL as the preview host of p, with its link as a bearer. */
function viaPreview(kit, p) {
  const u = new URL(kit.url.replace(/^ws/, "http"));
  return new Promise((resolve, reject) => {
    const req = http.get({ host: u.hostname, port: u.port, path: "/", headers: { Host: `${p.id}.preview.test`, Authorization: `Bearer ${p.link}` } }, (res) => {
      let body = "";
      res.on("data", (d) => (body += d));
      res.on("end", () => resolve({ status: res.statusCode, body }));
    });
    req.on("error", reject);
  });
}

describe("preview links (real kit)", () => {
  let kit, client, box, server;
  before(async () => {
    kit = await startKit({ manifest: { preview: { domain: "preview.test", http: true } } });
    client = new GloveboxClient({ endpoints: { box: { url: kit.url, key: kit.key } } });
    box = client.box("box");
    server = box.prompt(`exec node -e 'require("http").createServer((q, r) => r.end("served")).listen(8000, "127.0.0.1", () => console.log("listening"))'`);
    await first(server.events, "the server in the session to listen", (e) => e.event_type === "text_delta" && /listening/.test(e.data.text));
  });
  after(async () => {
    await server?.abort().catch(() => {});
    await client?.close();
    await kit?.stop();
  });

  test("mint, reach, list, revoke", async (t) => {
    const env = await box.environment();
    if (!env.capabilities.includes("preview")) {
      t.skip(`the box serves no previews here: ${env.capabilities}`);
      return;
    }
    const p = await box.preview(8000, { ttl: "10m" });
    assert.equal(p.port, 8000);
    assert.equal(p.session, box.sessionId);
    assert.match(p.url, new RegExp(`^http://${p.id}\\.preview\\.test(:\\d+)?/\\?glovebox_preview=gbp1\\.`));
    assert.deepEqual(await within(10000, "a GET through the link", viaPreview(kit, p)), { status: 200, body: "served" });
    const list = await box.previews();
    assert.deepEqual(list.map((x) => [x.id, x.link]), [[p.id, undefined]]);
    await box.revokePreview(p.id);
    assert.equal((await viaPreview(kit, p)).status, 410);
    await assert.rejects(box.revokePreview(p.id), (e) => e.status === 404);
    await assert.rejects(box.preview(0), { code: "BadRequest" });
  });
});
