// src/wire.ts is generated from protocol/schema/glovebox-v1.schema.json,
// which the Go side tests its types and golden frames against. Here the
// frames this client sends and receives in a real session are validated
// against the same schema, and so are the Go side's golden frames.
import assert from "node:assert/strict";
import { readdirSync, readFileSync } from "node:fs";
import { after, before, describe, test } from "node:test";
import { fileURLToPath } from "node:url";
import { generate, schemaPath, wirePath } from "../scripts/gen-wire.mjs";
import { CAPABILITIES, ERROR_CODES, FILE_KINDS, GloveboxClient } from "@glovebox-dev/client";
import { first, startKit, within } from "./helpers.mjs";

const schema = JSON.parse(readFileSync(schemaPath, "utf8"));
const goldenDir = fileURLToPath(new URL("../../../protocol/testdata/golden/", import.meta.url));

/** The subset of JSON Schema the protocol's schema uses (as protocol/schema_test.go). */
function validate(s, v, path = "$") {
  if (s.$ref) validate(schema.$defs[s.$ref.replace("#/$defs/", "")], v, path);
  if ("const" in s && JSON.stringify(s.const) !== JSON.stringify(v)) throw new Error(`${path}: ${JSON.stringify(v)}, want ${JSON.stringify(s.const)}`);
  if (s.enum && !s.enum.some((x) => JSON.stringify(x) === JSON.stringify(v))) throw new Error(`${path}: ${JSON.stringify(v)} is not one of ${s.enum}`);
  const t = v === null ? "null" : Array.isArray(v) ? "array" : typeof v;
  const ok = { object: t === "object", array: t === "array", string: t === "string", boolean: t === "boolean", null: t === "null", number: t === "number", integer: Number.isInteger(v) };
  if (s.type && !ok[s.type]) throw new Error(`${path}: ${t}, want ${s.type}`);
  if (s.minimum !== undefined && typeof v === "number" && v < s.minimum) throw new Error(`${path}: ${v} is below ${s.minimum}`);
  if (s.minLength !== undefined && typeof v === "string" && v.length < s.minLength) throw new Error(`${path}: shorter than ${s.minLength}`);
  if (t === "object") {
    for (const r of s.required ?? []) if (!(r in v)) throw new Error(`${path}: missing required ${JSON.stringify(r)}`);
    for (const [k, x] of Object.entries(v)) {
      if (s.properties?.[k]) validate(s.properties[k], x, `${path}.${k}`);
      else if (s.additionalProperties === false) throw new Error(`${path}: unexpected field ${JSON.stringify(k)}`);
      else if (typeof s.additionalProperties === "object") validate(s.additionalProperties, x, `${path}.${k}`);
    }
  }
  if (t === "array" && s.items) v.forEach((x, i) => validate(s.items, x, `${path}[${i}]`));
  if (s.oneOf) {
    const errs = [];
    const matched = s.oneOf.filter((alt) => {
      try {
        validate(alt, v, path);
        return true;
      } catch (e) {
        errs.push(e.message);
        return false;
      }
    });
    if (matched.length !== 1) throw new Error(`${path}: matches ${matched.length} alternatives, want one:\n  ${errs.join("\n  ")}`);
  }
}

test("src/wire.ts is what the schema generates (run npm run gen after changing the schema)", () => {
  assert.equal(readFileSync(wirePath, "utf8"), generate(schema));
});

test("the exported enums are the schema's", () => {
  assert.deepEqual([...CAPABILITIES], schema.$defs.capability.enum);
  assert.deepEqual([...ERROR_CODES], schema.$defs.error_code.enum);
  assert.deepEqual([...FILE_KINDS], schema.$defs.file_kind.enum);
});

test("the Go side's golden frames validate here too", () => {
  const files = readdirSync(goldenDir).filter((f) => f.endsWith(".json"));
  assert.ok(files.length > 20, `golden frames in ${goldenDir}`);
  for (const f of files) {
    const def = f.startsWith("client_") ? "client_message" : "server_message";
    validate(schema.$defs[def], JSON.parse(readFileSync(goldenDir + f, "utf8")), f);
  }
  assert.throws(() => validate(schema.$defs.server_message, { type: "event", id: "a", event_type: "x" }), /matches 0 alternatives/);
});

describe("a real session", () => {
  let kit;
  const frames = { sent: [], received: [] };
  before(async () => {
    // 3s: the prompts that must end do on a loaded machine (a 1.2 MB
    // output, a url input refused); "sleep 5" still times out.
    kit = await startKit({ manifest: { limits: { timeout: "3s" } } });
  });
  after(async () => kit?.stop());

  test("every frame of a real session, both ways, validates against the schema", async () => {
    const Base = globalThis.WebSocket ?? (await import("ws")).WebSocket;
    const Recording = class extends Base {
      constructor(...a) {
        super(...a);
        const send = this.send.bind(this);
        this.send = (d) => (frames.sent.push(JSON.parse(d)), send(d));
        this.addEventListener("message", (ev) => frames.received.push(JSON.parse(typeof ev.data === "string" ? ev.data : Buffer.from(ev.data).toString())));
      }
    };
    const client = GloveboxClient.make({ endpoints: { b: { url: kit.url, key: kit.key } }, WebSocket: Recording, keepaliveMs: 100 });
    const box = client.box("b");
    const r1 = box.prompt('echo out; echo err >&2; printf x > "$GLOVEBOX_OUTPUT/a.txt"; head -c 1200000 /dev/zero > "$GLOVEBOX_OUTPUT/big.bin"', {
      files: { "in.txt": { bytes: "in" } },
      inputs: { "ref.csv": { kind: "url", name: "ref.csv", url: "http://127.0.0.1:9/ref.csv" } },
      outputsPolicy: { inline_below: "1MB", server_ttl: "1h" },
    });
    await within(20000, "a prompt with a url input to end", r1.done.catch(() => {}));
    const r2 = box.prompt('printf x > "$GLOVEBOX_OUTPUT/a.txt"; head -c 1200000 /dev/zero > "$GLOVEBOX_OUTPUT/big.bin"; sleep 0.3');
    await within(20000, "a prompt with outputs", r2.done);
    const r3 = box.prompt("echo go; sleep 5");
    await first(r3.events, "the first event of r3");
    r3.abort();
    await within(10000, "an aborted prompt", r3.done.catch(() => {}));
    await within(10000, "a timed-out prompt", box.prompt("sleep 5").done.catch(() => {}));
    box.prompt("echo x").resolve("slot_404", { a: 1 });
    await within(10000, "a reject", box.prompt("echo y").reject("slot_405", "no"));
    await client.close();
    const types = (fs) => [...new Set(fs.map((f) => f.type))].sort();
    assert.deepEqual(types(frames.sent), ["abort", "display_reject", "display_resolve", "hello", "ping", "prompt"]);
    assert.deepEqual(types(frames.received), ["complete", "error", "event", "hello", "pong"]);
    for (const f of frames.sent) validate(schema.$defs.client_message, f, `sent ${f.type}`);
    for (const f of frames.received) validate(schema.$defs.server_message, f, `received ${f.type}`);
  });
});
