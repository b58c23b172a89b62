// Base64 without Buffer or atob, so the same code runs in Node and browsers.

const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
const lookup = new Int16Array(128).fill(-1);
for (let i = 0; i < alphabet.length; i++) lookup[alphabet.charCodeAt(i)] = i;
lookup["-".charCodeAt(0)] = 62;
lookup["_".charCodeAt(0)] = 63;

/** Standard base64 with padding. */
export function encodeBase64(bytes: Uint8Array): string {
  const parts: string[] = [];
  const chunk = 3 * 16384;
  for (let start = 0; start < bytes.length; start += chunk) {
    const end = Math.min(start + chunk, bytes.length);
    let s = "";
    let i = start;
    for (; i + 2 < end; i += 3) {
      const n = (bytes[i]! << 16) | (bytes[i + 1]! << 8) | bytes[i + 2]!;
      s += alphabet[n >> 18]! + alphabet[(n >> 12) & 63]! + alphabet[(n >> 6) & 63]! + alphabet[n & 63]!;
    }
    if (i < end) {
      const rest = end - i;
      const n = (bytes[i]! << 16) | (rest > 1 ? bytes[i + 1]! << 8 : 0);
      s += alphabet[n >> 18]! + alphabet[(n >> 12) & 63]! + (rest > 1 ? alphabet[(n >> 6) & 63]! : "=") + "=";
    }
    parts.push(s);
  }
  return parts.join("");
}

/**
 * Decodes standard or URL-safe base64 (or both mixed), padded or not, with
 * white space ignored, as the box does. Throws on any other character.
 */
export function decodeBase64(s: string): Uint8Array {
  const out = new Uint8Array(Math.floor((s.length * 3) / 4) + 3);
  let n = 0;
  let bits = 0;
  let o = 0;
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c === 32 || c === 9 || c === 10 || c === 13) continue;
    if (c === 61) break; // '=': padding ends the data
    const v = c < 128 ? lookup[c]! : -1;
    if (v < 0) throw new Error(`base64: invalid character ${JSON.stringify(s[i])} at ${i}`);
    n = (n << 6) | v;
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out[o++] = (n >> bits) & 0xff;
    }
  }
  if (bits >= 6) throw new Error("base64: truncated data");
  return out.subarray(0, o);
}
