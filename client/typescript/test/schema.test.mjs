// src/wire.ts is generated from protocol/schema/glovebox-v1.schema.json,
// which the Go side tests its types and golden frames against.
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { test } from "node:test";
import { generate, schemaPath, wirePath } from "../scripts/gen-wire.mjs";
import { CAPABILITIES, ERROR_CODES, FILE_KINDS } from "../dist/index.js";

test("src/wire.ts is what the schema generates (run npm run gen after changing the schema)", () => {
  assert.equal(readFileSync(wirePath, "utf8"), generate(JSON.parse(readFileSync(schemaPath, "utf8"))));
});

test("the exported enums are the schema's", () => {
  const defs = JSON.parse(readFileSync(schemaPath, "utf8")).$defs;
  assert.deepEqual([...CAPABILITIES], defs.capability.enum);
  assert.deepEqual([...ERROR_CODES], defs.error_code.enum);
  assert.deepEqual([...FILE_KINDS], defs.file_kind.enum);
});
