/**
 * @glovebox-dev/client: the TypeScript client for Glovebox boxes, for
 * Node 20+ and browsers. See README.md.
 */
export { GloveboxClient, type ClientOptions } from "./client.js";
export { Box, type SendErrorListener } from "./box.js";
export { type Endpoint } from "./endpoint.js";
export { guessMime, type InputFile, type PromptOptions } from "./prompt.js";
export { Result, type DisplayEvent, type PromptEvent, type ReadOptions } from "./result.js";
export { ClientCodes, GloveboxError, isGloveboxError, type Completion } from "./errors.js";
export { decodeBase64, encodeBase64 } from "./base64.js";
export { EGRESS_ASK_CHOICES, EGRESS_ASK_RENDERER, egressAsk, type EgressAsk, type EgressAskAnswer } from "./egress.js";
export { FS_ROOTS, parseFsPath, SessionFiles, type FsCallOptions, type FsListOptions, type FsReadOptions, type FsWriteOptions } from "./fs.js";
export { type PreviewOptions } from "./preview.js";
export { RUN_SIGN_CONTEXT, RunVerifyError, canonicalJSON, runChainStart, verifyRun, verifyRunChain, type RunOptions } from "./runs.js";
export { type RestoreOptions } from "./snapshots.js";
export { SUBPROTOCOL_BEARER_PREFIX, SUBPROTOCOL_V1, type WebSocketConstructor, type WebSocketLike } from "./socket.js";
export { Terminal } from "./terminal.js";
export type { Terminal as TerminalInfo } from "./wire.js";
export { type OutputOptions, type OutputPage } from "./processes.js";
export * from "./wire.js";
