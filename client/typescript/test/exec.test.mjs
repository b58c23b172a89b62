// Terminals and processes against the real kit built from this repository
// (as root here: a privilege-separated kit, its sessions in the full sandbox).
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { GloveboxClient, GloveboxError } from "@glovebox-dev/client";
import { readdirSync, readFileSync } from "node:fs";
import { startKit, within } from "./helpers.mjs";

/** Whether a process runs "sleep 1000" on this machine (the box's, here). */
function sleeping() {
  for (const pid of readdirSync("/proc")) {
    if (!/^\d+$/.test(pid)) continue;
    try {
      if (readFileSync(`/proc/${pid}/cmdline`, "latin1") === "sleep\x001000\x00") return true;
    } catch {
      /* gone */
    }
  }
  return false;
}

describe("terminals and processes (the kit)", () => {
  let kit;
  let client;
  before(async () => {
    kit = await startKit();
    client = GloveboxClient.make({ endpoints: { box: { url: kit.url, key: kit.key } } });
  });
  after(async () => {
    await client?.close();
    await kit?.stop();
  });

  test("a terminal echoes, resizes, takes ^C and ends with its status", async () => {
    const box = client.box("box");
    const session = await box.connect();
    assert.match(session, /^[0-9a-f]{32}$/);
    const env = await box.environment();
    assert.ok(env.capabilities.includes("terminals") && env.capabilities.includes("processes"));
    const t = await box.startTerminal(session, { command: ["/bin/sh"], cols: 100, rows: 30, env: { PS1: "$ " } });
    let screen = "";
    const decoder = new TextDecoder();
    const waiters = [];
    t.onData = (d) => {
      screen += decoder.decode(d, { stream: true });
      for (const w of waiters.splice(0)) w();
    };
    const until = (want) =>
      within(20000, `the terminal to show ${JSON.stringify(want)} (it shows ${JSON.stringify(screen)})`, (async () => {
        while (!screen.includes(want)) await new Promise((res) => waiters.push(res));
        screen = screen.slice(screen.indexOf(want) + want.length);
      })());
    t.write("tty; stty size\r");
    await until("/dev/pts/");
    await until("30 100");
    t.resize(120, 40);
    t.write("stty size\r");
    await until("40 120");
    t.write("sleep 1000\r");
    await within(20000, "sleep to run in the box", (async () => {
      while (!sleeping()) await new Promise((res) => setTimeout(res, 10));
    })());
    t.write("\x03");
    t.write("echo after-$?\r");
    await until("after-130");
    t.write("exit 7\r");
    const exit = await within(20000, "the terminal's exit", t.exited);
    assert.equal(exit.code, 7);
    assert.match(kit.log(), /privilege/i, "the kit runs privilege-separated here");
    const list = await box.terminals(session);
    assert.equal(list.length, 1);
    assert.equal(list[0].state, "exited");
  });

  test("a process takes stdin, pages and follows its output, and ends with its status", async () => {
    const box = client.box("box");
    const session = await box.connect();
    const p = await box.startProcess(session, { command: ["/bin/sh", "-c", "tr a-z A-Z; echo e >&2; exit 3"] });
    assert.equal(p.state, "running");
    await box.writeStdin(session, p.id, "hello\n", { close: true });
    let out = "";
    let last;
    for await (const page of box.followProcessOutput(session, p.id)) {
      out += new TextDecoder().decode(page.bytes);
      last = page;
    }
    assert.equal(out, "HELLO\n");
    assert.equal(last.eof, true);
    assert.equal(last.exit.code, 3);
    const err = await box.processOutput(session, p.id, { stderr: true });
    assert.equal(new TextDecoder().decode(err.bytes), "e\n");
    await assert.rejects(box.signalProcess(session, p.id, "SIGNOPE"), (e) => e instanceof GloveboxError && e.status === 400);
    await box.deleteProcess(session, p.id);
    assert.deepEqual(await box.processes(session), []);
  });
});
