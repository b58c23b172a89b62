// The original TypeScript kit's stand-in for kitbench's round trips: the
// v1 box the TypeScript client's tests run (Node and the ws library, as
// the original), written from the original's behavioural spec. It prints
// "address key" and serves until its standard input closes.
const { startV1 } = await import(process.env.KITBENCH_V1SERVER);
const key = "kitbench-original-stand-in-key-0123456789ab";
const box = await startV1({ key });
console.log(`127.0.0.1:${box.port} ${key}`);
process.stdin.resume();
process.stdin.on("end", () => process.exit(0));
