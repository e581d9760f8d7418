/** Token verification, including the cache of verified tokens: it must never outlive exp. */
import { expect, test } from "bun:test";
import { createTokens, TOKEN_TTL_SECONDS } from "../src/security/bearer-tokens";
import { TEST_SECRET } from "./helpers";

test("a remembered token stops verifying once it expires, like a fresh one", async () => {
  let clock = Date.UTC(2026, 0, 1);
  const tokens = createTokens(TEST_SECRET, () => clock);
  const token = await tokens.issue("ann@example.com", 3);
  const first = await tokens.verify(token);
  expect(first).toEqual({ sub: "ann@example.com", ver: 3, exp: Math.floor(clock / 1000) + TOKEN_TTL_SECONDS, iat: expect.any(Number) });
  expect(await tokens.verify(token)).toEqual(first!); // from the cache
  clock += (TOKEN_TTL_SECONDS - 1) * 1000;
  expect(await tokens.verify(token)).toEqual(first!);
  clock += 1000; // exp <= now: expired
  expect(await tokens.verify(token)).toBeUndefined();
  expect(await createTokens(TEST_SECRET, () => clock).verify(token)).toBeUndefined();
});

test("a tampered or foreign token is never served from the cache", async () => {
  const tokens = createTokens(TEST_SECRET, Date.now);
  const token = await tokens.issue("ann@example.com", 0);
  expect(await tokens.verify(token)).toBeDefined();
  const [header, payload, signature] = token.split(".");
  const flipped = signature[0] === "A" ? `B${signature.slice(1)}` : `A${signature.slice(1)}`;
  expect(await tokens.verify(`${header}.${payload}.${flipped}`)).toBeUndefined();
  expect(await createTokens("another-secret-".padEnd(80, "y"), Date.now).verify(token)).toBeUndefined();
});
