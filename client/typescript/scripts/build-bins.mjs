// Builds the Go binaries the tests run (the kit, the echo-agent example and
// gbx) from this repository into test/.bin, or into $GLOVEBOX_TS_BIN.
import { execFileSync } from "node:child_process";
import { mkdirSync } from "node:fs";
import { fileURLToPath } from "node:url";

const repo = fileURLToPath(new URL("../../..", import.meta.url));
const bin = process.env.GLOVEBOX_TS_BIN || fileURLToPath(new URL("../test/.bin", import.meta.url));
mkdirSync(bin, { recursive: true });
for (const [out, pkg] of [["glovebox-kit", "./cmd/glovebox-kit"], ["echo-agent", "./examples/echo-agent"], ["gbx", "./cmd/gbx"]]) {
  execFileSync("go", ["build", "-o", `${bin}/${out}`, pkg], { cwd: repo, stdio: "inherit" });
}
console.log(`built glovebox-kit, echo-agent and gbx into ${bin}`);
