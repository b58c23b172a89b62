// A small ACP agent built with the official TypeScript SDK. The kit/agent/acp
// tests drive it through Glovebox: each prompt's text is a command that
// makes the agent exercise one part of the protocol.
//
//   echo WORDS...     streams WORDS back as agent_message_chunk updates
//   think             sends a thought, then a message
//   tool              a tool call with in_progress and completed updates
//   failtool          a tool call that fails
//   extras            plan, usage_update and current_mode_update
//   permission        asks permission and reports the outcome
//   read PATH [L N]   fs/read_text_file (line L, limit N) and returns the text
//   write PATH TEXT   fs/write_text_file
//   term CMD ARGS...  terminal/create, wait_for_exit, output, release
//   shell LINE        runs LINE as the terminal's command, with no args
//   termcwd DIR       runs pwd in a terminal whose cwd is DIR
//   termkill          starts `sleep 60` in a terminal, kills it, releases it
//   termleak          starts `sleep 60` in a terminal and leaves it running
//   wait              streams a chunk, then waits for session/cancel
//   hang              ignores session/cancel
//   die               streams a chunk, then exits with status 3
//   inputs            describes the prompt's content blocks as JSON
//   env               reports its cwd and GLOVEBOX_* environment as JSON
//   count             how many prompts this process has served
//   bench N           N one-character chunks
//   stderr TEXT       writes TEXT to stderr
//   history           the prompts of this session so far, as JSON
//
// The agent supports session/load: every session's prompts are kept in
// .test-agent/<sessionId>.json under its cwd, and a later process (after
// the kit restarted) loads them, replaying them as session/update
// notifications first, as ACP asks.
//
// Any other text is echoed back as one chunk.
import { Readable, Writable } from "node:stream";
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import * as acp from "@agentclientprotocol/sdk";

const sessions = new Map(); // sessionId -> { cancelled: boolean, wake: () => void }
let served = 0;
let nextSession = 1;

const app = acp.agent({ name: "glovebox-test-agent" });

app.onRequest(acp.methods.agent.initialize, ({ params }) => ({
  protocolVersion: acp.PROTOCOL_VERSION,
  // ACP_TEST_LOAD=0 plays an agent that cannot load sessions.
  agentCapabilities: { loadSession: process.env.ACP_TEST_LOAD !== "0", promptCapabilities: { embeddedContext: true } },
  agentInfo: { name: "glovebox-test-agent", version: "0.0.0" },
  _meta: { clientCapabilities: params.clientCapabilities },
}));

app.onRequest(acp.methods.agent.session.new, ({ params, client }) => {
  const sessionId = `sess_${process.pid}_${nextSession++}`;
  sessions.set(sessionId, { cancelled: false, wake: () => {}, cwd: params.cwd, history: [] });
  // Sent before any prompt: the kit must not lose it.
  setImmediate(() => {
    client.notify(acp.methods.client.session.update, {
      sessionId,
      update: {
        sessionUpdate: "available_commands_update",
        availableCommands: [{ name: "echo", description: "echo the words back" }],
      },
    });
  });
  return { sessionId };
});

const historyFile = (cwd, sessionId) => join(cwd, ".test-agent", sessionId.replace(/[^A-Za-z0-9_-]/g, "_") + ".json");

app.onRequest(acp.methods.agent.session.load, async ({ params, client }) => {
  let history;
  try {
    history = JSON.parse(readFileSync(historyFile(params.cwd, params.sessionId), "utf8"));
  } catch {
    throw acp.RequestError.resourceNotFound(params.sessionId);
  }
  for (const text of history) {
    await client.notify(acp.methods.client.session.update, {
      sessionId: params.sessionId,
      update: { sessionUpdate: "user_message_chunk", content: { type: "text", text } },
    });
    await client.notify(acp.methods.client.session.update, {
      sessionId: params.sessionId,
      update: { sessionUpdate: "agent_message_chunk", content: { type: "text", text: "replayed " + text } },
    });
  }
  sessions.set(params.sessionId, { cancelled: false, wake: () => {}, cwd: params.cwd, history });
  return {};
});

app.onNotification(acp.methods.agent.session.cancel, ({ params }) => {
  const s = sessions.get(params.sessionId);
  if (s) {
    s.cancelled = true;
    s.wake();
  }
});

app.onRequest(acp.methods.agent.session.prompt, async ({ params, client }) => {
  served++;
  const s = sessions.get(params.sessionId);
  if (!s) throw acp.RequestError.invalidParams({ sessionId: params.sessionId }, "unknown session");
  s.cancelled = false;
  const sessionId = params.sessionId;
  const update = (u) => client.notify(acp.methods.client.session.update, { sessionId, update: u });
  const say = (text) => update({ sessionUpdate: "agent_message_chunk", content: { type: "text", text } });

  const text = params.prompt
    .filter((b) => b.type === "text")
    .map((b) => b.text)
    .at(-1) ?? "";
  const [cmd, ...args] = text.trim().split(/\s+/);
  s.history.push(text);
  try {
    mkdirSync(join(s.cwd, ".test-agent"), { recursive: true });
    writeFileSync(historyFile(s.cwd, sessionId), JSON.stringify(s.history));
  } catch {
    // A read-only cwd: no history kept.
  }

  switch (cmd) {
    case "echo":
      for (let i = 0; i < args.length; i++) await say((i ? " " : "") + args[i]);
      break;
    case "history":
      await say(JSON.stringify(s.history));
      break;
    case "think":
      await update({ sessionUpdate: "agent_thought_chunk", content: { type: "text", text: "pondering" } });
      await say("thought about it");
      break;
    case "tool":
      await update({
        sessionUpdate: "tool_call", toolCallId: "call_1", title: "list files", kind: "read",
        status: "pending", rawInput: { dir: "/work" },
      });
      await update({ sessionUpdate: "tool_call_update", toolCallId: "call_1", status: "in_progress" });
      await update({
        sessionUpdate: "tool_call_update", toolCallId: "call_1", status: "completed",
        content: [{ type: "content", content: { type: "text", text: "a.txt" } }],
        rawOutput: { files: ["a.txt"] },
      });
      await say("done");
      break;
    case "failtool":
      await update({ sessionUpdate: "tool_call", toolCallId: "call_2", title: "explode", kind: "execute", status: "in_progress" });
      await update({
        sessionUpdate: "tool_call_update", toolCallId: "call_2", status: "failed",
        content: [{ type: "content", content: { type: "text", text: "boom" } }],
      });
      break;
    case "extras":
      await update({
        sessionUpdate: "plan",
        entries: [{ content: "look around", priority: "high", status: "in_progress" }],
      });
      await update({ sessionUpdate: "usage_update", used: 1200, size: 200000 });
      await update({ sessionUpdate: "current_mode_update", currentModeId: "code" });
      await say("ok");
      break;
    case "permission": {
      await update({
        sessionUpdate: "tool_call", toolCallId: "call_3", title: "rm -rf /work/tmp", kind: "delete",
        status: "pending", rawInput: { path: "/work/tmp" },
      });
      const res = await client.request(acp.methods.client.session.requestPermission, {
        sessionId,
        toolCall: { toolCallId: "call_3", title: "rm -rf /work/tmp", rawInput: { path: "/work/tmp" } },
        options: [
          { optionId: "allow", name: "Allow once", kind: "allow_once" },
          { optionId: "always", name: "Always allow", kind: "allow_always" },
          { optionId: "deny", name: "Reject", kind: "reject_once" },
        ],
      });
      if (res.outcome.outcome === "cancelled" && s.cancelled) return { stopReason: "cancelled" };
      await say(res.outcome.outcome === "selected" ? `selected ${res.outcome.optionId}` : "cancelled");
      break;
    }
    case "read": {
      const req = { sessionId, path: args[0] };
      if (args[1]) req.line = Number(args[1]);
      if (args[2]) req.limit = Number(args[2]);
      try {
        const res = await client.request(acp.methods.client.fs.readTextFile, req);
        await say(res.content);
      } catch (e) {
        await say(`error ${e.code}: ${e.message}`);
      }
      break;
    }
    case "write": {
      try {
        await client.request(acp.methods.client.fs.writeTextFile, { sessionId, path: args[0], content: args.slice(1).join(" ") });
        await say("written");
      } catch (e) {
        await say(`error ${e.code}: ${e.message}`);
      }
      break;
    }
    case "term": {
      try {
        const term = await client.createTerminal({ sessionId, command: args[0], args: args.slice(1), outputByteLimit: 64 });
        const exit = await term.waitForExit();
        const out = await term.currentOutput();
        await term.release();
        await say(JSON.stringify({ exit, output: out.output, truncated: out.truncated }));
      } catch (e) {
        await say(`error ${e.code}: ${e.message}`);
      }
      break;
    }
    case "shell": {
      const term = await client.createTerminal({ sessionId, command: text.trim().slice("shell ".length) });
      await term.waitForExit();
      const out = await term.currentOutput();
      await term.release();
      await say(out.output);
      break;
    }
    case "termcwd": {
      try {
        const term = await client.createTerminal({ sessionId, command: "pwd", cwd: args[0] });
        await term.waitForExit();
        const out = await term.currentOutput();
        await term.release();
        await say(out.output);
      } catch (e) {
        await say(`error ${e.code}: ${e.message}`);
      }
      break;
    }
    case "termkill": {
      const term = await client.createTerminal({ sessionId, command: "sleep", args: ["60"] });
      await term.kill();
      const exit = await term.waitForExit();
      await term.release();
      await say(JSON.stringify({ exit }));
      break;
    }
    case "termleak": {
      const term = await client.createTerminal({ sessionId, command: "sleep", args: ["60"] });
      await say(term.id);
      break;
    }
    case "wait":
      await say("waiting");
      if (!s.cancelled) await new Promise((resolve) => { s.wake = resolve; });
      return { stopReason: "cancelled" };
    case "hang":
      await say("hanging");
      await new Promise(() => {});
      break;
    case "die":
      await say("dying");
      setTimeout(() => process.exit(3), 10);
      await new Promise(() => {});
      break;
    case "inputs":
      await say(JSON.stringify(params.prompt));
      break;
    case "env":
      await say(JSON.stringify({
        cwd: process.cwd(), sessionCwd: s.cwd,
        work: process.env.GLOVEBOX_WORK, input: process.env.GLOVEBOX_INPUT,
        output: process.env.GLOVEBOX_OUTPUT, extra: process.env.ACP_TEST_EXTRA ?? null,
        pid: process.pid,
      }));
      break;
    case "count":
      await say(String(served));
      break;
    case "bench": {
      const n = Number(args[0] ?? 1);
      for (let i = 0; i < n; i++) await say("x");
      break;
    }
    case "stderr":
      process.stderr.write(args.join(" ") + "\n");
      await say("logged");
      break;
    default:
      await say(text);
  }
  return { stopReason: "end_turn" };
});

const stream = acp.ndJsonStream(Writable.toWeb(process.stdout), Readable.toWeb(process.stdin));
const conn = app.connect(stream);
conn.closed.then(() => process.exit(0));
