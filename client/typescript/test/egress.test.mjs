// A session's own egress rules, against the real kit: set in the hello
// (ClientOptions.egress) and during the session (Box.setEgress).
import assert from "node:assert/strict";
import http from "node:http";
import { after, before, describe, test } from "node:test";
import { GloveboxClient, GloveboxError, ClientCodes } from "@glovebox-dev/client";
import { startKit, within } from "./helpers.mjs";

describe("session egress rules (real kit)", () => {
  let kit, client, server, port;
  before(async () => {
    // The upstream is a loopback server the box's policy opens by
    // address and port: no traffic leaves this machine.
    server = http.createServer((req, res) => res.end("hello from upstream\n"));
    await new Promise((res) => server.listen(0, "127.0.0.1", res));
    port = server.address().port;
    kit = await startKit({ manifest: { network: { default: "deny", allow: [`127.0.0.1:${port}`] } } });
    client = new GloveboxClient({ endpoints: { box: { url: kit.url, key: kit.key } }, egress: { default: "deny" } });
  });
  after(async () => {
    await client?.close();
    await kit?.stop();
    server?.close();
  });

  const curl = async (box) => {
    const r = box.prompt(`curl -s --noproxy '' -o /dev/null -w '%{http_code}' http://127.0.0.1:${port}/`);
    return (await within(30000, "curl through the proxy", r.message)).trim();
  };

  test("the hello's rules narrow the session before its first prompt; setEgress changes them at once", async () => {
    const box = client.box("box");
    assert.equal(await curl(box), "451", "narrowed by the hello's rules");
    assert.ok(box.capabilities.has("egress_rules"));
    assert.equal(box.egress?.session?.default, "deny", "the box reported the session's rules");
    const v = await box.setEgress({});
    assert.equal(v.session, undefined, "cleared");
    assert.deepEqual(v.allow, [`127.0.0.1:${port}`]);
    assert.equal(await curl(box), "200", "the box's policy again");
    const w = await box.setEgress({ deny: ["127.0.0.1"] });
    assert.deepEqual(w.session?.deny, ["127.0.0.1"]);
    assert.equal(await curl(box), "451");
  });

  test("rules the box refuses fail with BadRequest and leave the session's rules alone", async () => {
    const box = client.box("box");
    await assert.rejects(box.setEgress({ allow: ["*.*"] }), (e) => e instanceof GloveboxError && e.code === ClientCodes.BadRequest && /allow\[0\]/.test(e.message));
    await assert.rejects(box.setEgress({ session_may_allow: ["x.test"] }), (e) => e.code === ClientCodes.BadRequest && /session_may_allow/.test(e.message));
    assert.deepEqual(box.egress?.session?.deny, ["127.0.0.1"]);
  });
});
