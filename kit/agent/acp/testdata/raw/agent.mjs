// A misbehaving ACP agent with no dependencies: it writes JSON-RPC by hand
// so the kit/agent/acp tests can send what no SDK would. Prompt text commands:
//
//   garbage   a line that is not JSON, a response to an id the client never
//             used, an update the client does not know, an update without
//             sessionUpdate and a request for a method no client serves;
//             then it reports the client's answer to that request
//   huge N    one session/update line of N bytes
//   crlf      answers with CRLF line endings and blank lines
//   bench N   N one-character chunks written at once
//   spawn     starts `sleep 60` in its own process group and reports its pid
//   flood N   N permission requests at once; reports how many were refused
//   deaf      stops reading its stdin
//
// The environment tunes the handshake: RAW_VERSION sets the protocol
// version initialize answers with, RAW_AUTH=1 makes session/new demand
// authentication, RAW_AUTH=envvar makes it demand an authenticate call
// with the env_var method "raw-key", which works when RAW_KEY is set.
// RAW_INIT_WAIT_FILE holds the answer to initialize until that file
// exists. RAW_IGNORE_TERM=1 makes the agent ignore SIGTERM.
import { spawn } from "node:child_process";
import { existsSync } from "node:fs";
import { createInterface } from "node:readline";

if (process.env.RAW_IGNORE_TERM === "1") process.on("SIGTERM", () => {});

const whenFileExists = (path, f) => {
  if (!path || existsSync(path)) return f();
  setTimeout(() => whenFileExists(path, f), 20);
};
const send = (m) => process.stdout.write(JSON.stringify(m) + "\n");
const pending = new Map();
let authenticated = false;
let nextId = 1000;
const call = (method, params) =>
  new Promise((resolve) => {
    const id = nextId++;
    pending.set(id, resolve);
    send({ jsonrpc: "2.0", id, method, params });
  });
const update = (sessionId, u) => send({ jsonrpc: "2.0", method: "session/update", params: { sessionId, update: u } });
const say = (sessionId, text) => update(sessionId, { sessionUpdate: "agent_message_chunk", content: { type: "text", text } });

async function prompt(id, params) {
  const sid = params.sessionId;
  const text = params.prompt.filter((b) => b.type === "text").map((b) => b.text).at(-1) ?? "";
  const [cmd, arg] = text.trim().split(/\s+/);
  switch (cmd) {
    case "garbage": {
      process.stdout.write("this is not json\n");
      process.stdout.write("[1,2,3]\n");
      send({ jsonrpc: "2.0", id: 424242, result: {} });
      send({ jsonrpc: "2.0", id: "nope", result: {} });
      update(sid, { sessionUpdate: "_vendor_thing", x: 1, nested: { y: [1, 2] } });
      update(sid, { what: "no discriminator" });
      send({ jsonrpc: "2.0", method: "_vendor/notice", params: {} });
      const res = await call("_vendor/method", { sessionId: sid });
      say(sid, JSON.stringify(res));
      break;
    }
    case "huge":
      update(sid, { sessionUpdate: "agent_message_chunk", content: { type: "text", text: "x".repeat(Number(arg)) } });
      break;
    case "bench": {
      const line = JSON.stringify({ jsonrpc: "2.0", method: "session/update", params: { sessionId: sid, update: { sessionUpdate: "agent_message_chunk", content: { type: "text", text: "x" } } } }) + "\n";
      process.stdout.write(line.repeat(Number(arg)));
      break;
    }
    case "spawn": {
      const child = spawn("sleep", ["60"], { stdio: "ignore" });
      say(sid, String(child.pid));
      break;
    }
    case "flood": {
      const results = await Promise.all(Array.from({ length: Number(arg) }, (_, i) =>
        call("session/request_permission", {
          sessionId: sid,
          toolCall: { toolCallId: `f${i}`, title: "flood" },
          options: [{ optionId: "allow", name: "Allow", kind: "allow_once" }],
        })));
      const refused = results.filter((r) => r.error && /too many/.test(r.error.message)).length;
      const selected = results.filter((r) => r.result?.outcome?.outcome === "selected").length;
      say(sid, `refused=${refused} selected=${selected}`);
      break;
    }
    case "deaf":
      rl.pause();
      process.stdin.pause();
      setInterval(() => {}, 1 << 30); // stay alive with nothing to read
      break;
    case "crlf":
      process.stdout.write("\r\n\r\n");
      process.stdout.write(JSON.stringify({ jsonrpc: "2.0", method: "session/update", params: { sessionId: sid, update: { sessionUpdate: "agent_message_chunk", content: { type: "text", text: "crlf ok" } } } }) + "\r\n");
      break;
    default:
      say(sid, text);
  }
  send({ jsonrpc: "2.0", id, result: { stopReason: "end_turn" } });
}

const rl = createInterface({ input: process.stdin });
rl.on("line", (line) => {
  let m;
  try {
    m = JSON.parse(line);
  } catch {
    return;
  }
  if (m.method === undefined && pending.has(m.id)) {
    const resolve = pending.get(m.id);
    pending.delete(m.id);
    resolve(m.error ? { error: m.error } : { result: m.result });
    return;
  }
  switch (m.method) {
    case "initialize":
      whenFileExists(process.env.RAW_INIT_WAIT_FILE, () => send({ jsonrpc: "2.0", id: m.id, result: {
        protocolVersion: Number(process.env.RAW_VERSION ?? 1),
        agentCapabilities: {},
        authMethods: [
          { id: "api-key", name: "API key" },
          { type: "env_var", id: "raw-key", name: "Use RAW_KEY", vars: [{ name: "RAW_KEY" }] },
        ],
      } }));
      break;
    case "authenticate":
      if (m.params.methodId === "raw-key" && process.env.RAW_KEY) {
        authenticated = true;
        send({ jsonrpc: "2.0", id: m.id, result: {} });
      } else {
        send({ jsonrpc: "2.0", id: m.id, error: { code: -32000, message: "bad credentials" } });
      }
      break;
    case "session/new":
      if (process.env.RAW_AUTH === "1" || (process.env.RAW_AUTH === "envvar" && !authenticated)) {
        send({ jsonrpc: "2.0", id: m.id, error: { code: -32000, message: "Authentication required" } });
      } else {
        send({ jsonrpc: "2.0", id: m.id, result: { sessionId: "raw_1" } });
      }
      break;
    case "session/prompt":
      prompt(m.id, m.params);
      break;
    case "session/cancel":
      break;
    default:
      if (m.id !== undefined) send({ jsonrpc: "2.0", id: m.id, error: { code: -32601, message: "nope" } });
  }
});
rl.on("close", () => process.exit(0));
