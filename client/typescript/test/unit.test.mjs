// Pure parts: base64, MIME guesses, URLs, the message size cap.
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { test } from "node:test";
import { decodeBase64, encodeBase64, GloveboxClient, guessMime } from "@glovebox-dev/client";

test("base64 matches Node's for every length up to 300 and a large buffer", () => {
  for (let n = 0; n <= 300; n++) {
    const b = randomBytes(n);
    assert.equal(encodeBase64(b), b.toString("base64"), `encode ${n} bytes`);
    assert.deepEqual(Buffer.from(decodeBase64(b.toString("base64"))), b, `decode ${n} bytes`);
  }
  const big = randomBytes(3_000_001);
  assert.equal(encodeBase64(big), big.toString("base64"));
  // A Buffer from Node's pool is a view at an offset.
  const view = Buffer.from("xxhello").subarray(2);
  assert.equal(encodeBase64(view), "aGVsbG8=");
});

test("decodeBase64 takes url-safe, unpadded and spaced input, as the box does, and refuses junk", () => {
  const b = Buffer.from([0xfb, 0xff, 0xbf, 0x01]);
  for (const s of ["+/+/AQ==", "-_-_AQ", "+/-_ AQ\n=="]) assert.deepEqual(Buffer.from(decodeBase64(s)), b, s);
  assert.throws(() => decodeBase64("ab$c"), /invalid character "\$"/);
  assert.throws(() => decodeBase64("a"), /truncated/);
});

test("guessMime follows v1's table", () => {
  assert.equal(guessMime("a.PDF"), "application/pdf");
  assert.equal(guessMime("dir/x.tar.gz"), "application/gzip");
  assert.equal(guessMime("noext"), "application/octet-stream");
});

test("HTTP routes keep the endpoint's path prefix; credentials in the URL are refused", () => {
  const c = GloveboxClient.make({ endpoints: { a: { url: "wss://h.example/boxes/media/?x=1", key: "k" }, b: { url: "http://h.example:8080", key: "k" } } });
  assert.equal(c.box("a").route("environment").href, "https://h.example/boxes/media/environment");
  assert.equal(c.box("b").route("files/abc").href, "http://h.example:8080/files/abc");
  assert.throws(() => GloveboxClient.make({ endpoints: { a: { url: "ws://u:p@h/", key: "k" } } }), /credentials in the URL/);
});

test("the message cap counts UTF-8 bytes", async () => {
  const c = GloveboxClient.make({ endpoints: { a: { url: "ws://127.0.0.1:9/", key: "k" } }, maxMessageBytes: 120 });
  const text = "é".repeat(50); // 50 UTF-16 units, 100 bytes
  await assert.rejects(c.box("a").prompt(text).done, (e) => e.code === "TooLarge" && /is 1\d\d bytes, over the 120-byte limit/.test(e.message));
  await c.close();
});

test("egressAsk recognises an egress-ask slot and nothing else", async () => {
  const { egressAsk, EGRESS_ASK_CHOICES } = await import("@glovebox-dev/client");
  const input = { message: "the agent wants api.github.com:443", host: "api.github.com", port: 443, choices: [...EGRESS_ASK_CHOICES], line: 'allow = ["api.github.com:443"]', timeout_ms: 60000 };
  assert.deepEqual(egressAsk({ type: "push", slot_id: "slot_1", slot: { renderer: "glovebox.egress_ask", input, id: "slot_1" } }), input);
  assert.equal(egressAsk({ type: "push", slot_id: "slot_2", slot: { renderer: "confirm", input, id: "slot_2" } }), undefined);
  assert.equal(egressAsk({ type: "push", slot_id: "slot_3", slot: { renderer: "glovebox.egress_ask", input: "junk", id: "slot_3" } }), undefined);
  assert.equal(egressAsk({ type: "clear", slot_id: "slot_1" }), undefined);
  assert.deepEqual([...EGRESS_ASK_CHOICES], ["once", "session", "box", "deny"]);
});
