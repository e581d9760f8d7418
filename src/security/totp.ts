/**
 * TOTP (RFC 6238 through otpauth: SHA-1, 6 digits, 30-second steps, what authenticator apps
 * expect) and recovery codes. A code is accepted within ±1 step of the clock, and only for a step
 * later than the last one accepted for the user (store/mfa.ts keeps it), so a code is never
 * accepted twice. Secrets are sealed by the data cipher before they are stored.
 */
import type { Secret } from "otpauth";
import { sha256Base64url } from "../digest";

export const TOTP_PERIOD_S = 30;
const ISSUER = "usersvc";

/** What seals TOTP secrets at rest: the data cipher (security/data-encryption.ts). */
export interface SecretCipher {
  seal(plain: string): string;
  open(sealed: string): Buffer;
}

/** otpauth and qrcode are loaded by the first enrolment or code check, not at start: an idle process never holds them. */
let otpauth: Promise<typeof import("otpauth")> | undefined;
let qrcode: Promise<typeof import("qrcode")> | undefined;
// Its build for node: HMAC through node:crypto. Under Bun the package's exports pick the browser
// build, whose HMAC-SHA1 in JavaScript made a code check ~10× slower (a wrong code ~0.4 ms).
const loadOtpauth = () => (otpauth ??= import("otpauth/dist/otpauth.node.mjs"));
const loadQrcode = () => (qrcode ??= import("qrcode"));

const totpFor = ({ TOTP }: typeof import("otpauth"), secret: Secret, label: string) =>
  new TOTP({ issuer: ISSUER, label, algorithm: "SHA1", digits: 6, period: TOTP_PERIOD_S, secret });

/** A new 160-bit secret: its base32 form, the otpauth:// URI and that URI as a QR code in SVG. */
export async function newTotpSecret(label: string) {
  const lib = await loadOtpauth();
  const secret = new lib.Secret({ size: 20 });
  const otpauthUri = totpFor(lib, secret, label).toString();
  const qrSvg = await (await loadQrcode()).toString(otpauthUri, { type: "svg", errorCorrectionLevel: "M", margin: 2 });
  return { secret: secret.base32, otpauthUri, qrSvg };
}

/** The step (30 s since the epoch) a 6-digit `code` belongs to, within ±1 step of `nowMs`, if it is one after `lastStep`. */
export async function acceptedStep(secretBase32: string, code: string, nowMs: number, lastStep: number): Promise<number | undefined> {
  if (!/^\d{6}$/.test(code)) return undefined;
  const lib = await loadOtpauth();
  const delta = totpFor(lib, lib.Secret.fromBase32(secretBase32), ISSUER).validate({ token: code, timestamp: nowMs, window: 1 });
  if (delta === null) return undefined;
  const step = Math.floor(nowMs / 1000 / TOTP_PERIOD_S) + delta;
  return step > lastStep ? step : undefined;
}

/* ---- Recovery codes: `xxxxx-xxxxx` over 32 letters and digits = 50 random bits ---- */

const ALPHABET = "0123456789abcdefghjkmnpqrstvwxyz";
export const RECOVERY_CODE_COUNT = 10;

export function newRecoveryCodes(): string[] {
  return Array.from({ length: RECOVERY_CODE_COUNT }, () => {
    const chars = Array.from(crypto.getRandomValues(new Uint8Array(10)), (byte) => ALPHABET[byte & 31]).join("");
    return `${chars.slice(0, 5)}-${chars.slice(5)}`;
  });
}

/** The stored form of a code as typed: case, spaces and the dash do not matter. */
export function recoveryCodeHash(typed: string): string | undefined {
  const chars = typed.toLowerCase().replace(/[\s-]/g, "");
  return /^[0-9a-z]{10}$/.test(chars) ? sha256Base64url(`${chars.slice(0, 5)}-${chars.slice(5)}`) : undefined;
}

/** Whether a submitted second-factor code looks like a recovery code rather than a TOTP code. */
export const isRecoveryCode = (code: string) => !/^\d{6}$/.test(code.trim());
