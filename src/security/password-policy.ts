/**
 * PASSWORD_POLICY: which new passwords are accepted, in one place every password-setting path
 * calls (registration, password change and reset, POST /api/users, `usersvc admin create`).
 *
 * - `seed` (the default): the seed's rules alone, checked by the Password schema (8-20
 *   characters, upper and lower case, a digit and one of @$!%*?&). Nothing more is checked.
 * - `strict`, after NIST SP 800-63B 5.1.1.2: 8 to 128 characters of any Unicode (counted in code
 *   points), no composition rules; refused are a password on the common-password list
 *   (case-insensitive, itself or without its leading and trailing digits and symbols, so
 *   `Password1!` and `Qwerty123!` are refused as `password` and `qwerty`), one containing the
 *   account's e-mail local part (4 characters or more), and, with HIBP_RANGE_URL set, one that
 *   Have I Been Pwned's range API knows (k-anonymity: only 5 hex digits of its SHA-1 are sent).
 */
import type { TSchema } from "elysia";
import type { Config } from "../config";
import { Violations } from "../errors";
import type { Violation } from "../validation";
import { PASSWORD_PATTERN } from "../models/user";
import { packedCommonPasswords } from "./common-passwords" with { type: "macro" };

export type PasswordPolicy = "seed" | "strict";

export interface PasswordPolicyDeps {
  config: Pick<Config, "passwordPolicy" | "hibpRangeUrl">;
  logger: { warn(obj: object, msg: string): void };
}

/** 8 to 128 code points: a surrogate pair (an emoji) is one character, as NIST counts them; a lone surrogate is one too. */
const STRICT_LENGTH = /^(?:[\uD800-\uDBFF][\uDC00-\uDFFF]|[\uD800-\uDBFF](?![\uDC00-\uDFFF])|[^\uD800-\uDBFF]){8,128}$/;

/** The strict policy's schema rule: maxLength (UTF-16 units, 2 per code point at most) bounds the input before the pattern runs. */
const strictRule = {
  minLength: 8,
  maxLength: 256,
  pattern: STRICT_LENGTH.source,
  description: "8 to 128 characters, any Unicode; common passwords and ones containing the e-mail's local part are refused",
  messages: { required: "field.password.blank", minLength: "field.password.length.strict", maxLength: "field.password.length.strict", pattern: "field.password.length.strict" },
} as const;

/**
 * The body schema a route validates with under `policy`: the schema itself under `seed` (the
 * same document and answers as before), else a copy whose seed password fields (recognised by
 * the seed's pattern) carry the strict length rule instead.
 */
export function withPasswordPolicy<T extends TSchema>(schema: T, policy: PasswordPolicy): T {
  if (policy === "seed") return schema;
  const properties = Object.fromEntries(
    Object.entries(schema.properties as Record<string, TSchema>).map(([name, property]) => [
      name,
      property.pattern === PASSWORD_PATTERN ? { ...property, ...strictRule } : property,
    ]),
  );
  return { ...schema, properties };
}

// ---------------------------------------------------------------- the common-password list

/** The list as one byte buffer, sorted, and where each entry starts (one more: the end). */
let list: { bytes: Uint8Array; starts: Uint32Array } | undefined;

/**
 * Unpacked on the first strict check, never at start: the packed list is a string literal in the
 * program (~190 KB), the unpacked one ~0.6 MB (388 KB of bytes and 49,234 offsets).
 */
function commonList() {
  if (list) return list;
  const bytes = Bun.gunzipSync(Buffer.from(packedCommonPasswords(), "base64"));
  let entries = 1;
  for (let i = 0; i < bytes.length; i++) if (bytes[i] === 10) entries++;
  const starts = new Uint32Array(entries + 1);
  for (let i = 0, n = 1; i < bytes.length; i++) if (bytes[i] === 10) starts[n++] = i + 1;
  starts[entries] = bytes.length + 1;
  list = { bytes, starts };
  return list;
}

/** Binary search of a lower-cased candidate; the list is ASCII, so any other character is absent. */
function onList(candidate: string): boolean {
  if (candidate === "" || /[^\x20-\x7e]/.test(candidate)) return false;
  const { bytes, starts } = commonList();
  let low = 0;
  let high = starts.length - 2;
  while (low <= high) {
    const middle = (low + high) >>> 1;
    const start = starts[middle];
    const length = starts[middle + 1] - 1 - start;
    let order = 0;
    for (let i = 0; order === 0 && i < Math.min(length, candidate.length); i++) order = bytes[start + i] - candidate.charCodeAt(i);
    if (order === 0) order = length - candidate.length;
    if (order === 0) return true;
    if (order < 0) low = middle + 1;
    else high = middle - 1;
  }
  return false;
}

/** Everything before the first and after the last letter: digits, symbols, spaces. */
const EDGES = /^[^\p{L}]+|[^\p{L}]+$/gu;

/** Whether a password is on the list, itself or without its leading and trailing digits and symbols (case-insensitive). */
function isCommonPassword(password: string): boolean {
  const lowered = password.toLowerCase();
  return onList(lowered) || onList(lowered.replace(EDGES, ""));
}

/** Whether the password contains the e-mail's local part (when it has 4 characters or more), case-insensitive. */
function containsLocalPart(password: string, email: string): boolean {
  const local = email.slice(0, email.lastIndexOf("@")).toLowerCase();
  return [...local].length >= 4 && password.toLowerCase().includes(local);
}

// ---------------------------------------------------------------- Have I Been Pwned

const HIBP_TIMEOUT_MS = 2000;

/**
 * Whether the range API lists the password's SHA-1 with a count above 0 (padding lines have 0).
 * Fails open: a timeout, a refused connection or an error status accepts the password, with one
 * warning that names the failure but never the password or any part of its hash.
 */
async function breached(rangeUrl: string, password: string, logger: PasswordPolicyDeps["logger"]): Promise<boolean> {
  const hash = new Bun.CryptoHasher("sha1").update(password).digest("hex").toUpperCase();
  try {
    const response = await fetch(rangeUrl + hash.slice(0, 5), { headers: { "Add-Padding": "true" }, signal: AbortSignal.timeout(HIBP_TIMEOUT_MS) });
    if (!response.ok) throw new Error(`status ${response.status}`);
    const suffix = hash.slice(5);
    for (const line of (await response.text()).split("\n")) {
      const [lineSuffix, count] = line.trim().split(":");
      if (lineSuffix?.toUpperCase() === suffix) return Number(count) > 0;
    }
    return false;
  } catch (error) {
    // "status 500", "TimeoutError", "ConnectionRefused": what failed, never the asked URL (it holds the prefix).
    const { message, code, name } = (error ?? {}) as { message?: string; code?: unknown; name?: string };
    const reason = message?.startsWith("status ") ? message : typeof code === "string" ? code : name;
    logger.warn({ hibp: new URL(rangeUrl).origin, reason }, "breached-password check unavailable: password accepted without it");
    return false;
  }
}

// ---------------------------------------------------------------- the check

/** The account's e-mail, or how to read it (only the strict policy needs it). */
type EmailOf = string | (() => Promise<string>);

/** What the policy finds wrong with a new password for the account `email`; `field` names it in the answer. */
export async function passwordViolations(deps: PasswordPolicyDeps, password: string, email: EmailOf, field: string): Promise<Violation[]> {
  if (deps.config.passwordPolicy === "seed") return [];
  // The HTTP paths' schemas have checked the length already; the CLI's have not.
  if (password.length > strictRule.maxLength || !STRICT_LENGTH.test(password)) return [{ path: field, key: "field.password.length.strict" }];
  const out: Violation[] = [];
  if (isCommonPassword(password)) out.push({ path: field, key: "field.password.common" });
  if (containsLocalPart(password, typeof email === "string" ? email : await email())) out.push({ path: field, key: "field.password.email" });
  if (out.length === 0 && deps.config.hibpRangeUrl && (await breached(deps.config.hibpRangeUrl, password, deps.logger))) {
    out.push({ path: field, key: "field.password.common" });
  }
  return out;
}

/** Refuses (400, like a schema failure) a new password the policy does not accept. */
export async function assertPasswordAllowed(deps: PasswordPolicyDeps, password: string, email: EmailOf, field = "password"): Promise<void> {
  const violations = await passwordViolations(deps, password, email, field);
  if (violations.length > 0) throw new Violations("body", violations);
}
