/**
 * The "date-time" format every answer's instants are checked against (src/validation.ts): fast for
 * toISOString's form, Elysia's own check for everything else, so it accepts what it accepted.
 */
import { describe, expect, test } from "bun:test";
import { FormatRegistry } from "@sinclair/typebox";
import "../src/validation";

const dateTime = (value: string) => FormatRegistry.Get("date-time")?.(value);

describe("date-time format", () => {
  test.each([
    ["2026-11-23T17:49:27.483Z", "toISOString's form"],
    ["1970-01-01T00:00:00.000Z", "the epoch"],
    ["2025-01-31T23:59:59.999Z", "a 31st of a long month"],
    ["2025-11-30T08:00:00.000Z", "a 30th"],
    ["2026-11-29T10:00:00.000Z", "a 29th outside February"],
    ["2024-02-29T12:00:00.000Z", "a leap day"],
    ["2025-01-01T00:00:00Z", "no fraction"],
    ["2025-01-01T02:00:00.000+02:00", "an offset"],
    ["2025-01-01", "a plain date (Elysia's check took it, so it still does)"],
  ])("%s is accepted: %s", (value) => {
    expect(dateTime(value)).toBe(true);
  });

  test.each([
    ["2025-13-01T00:00:00.000Z", "month 13"],
    ["2025-01-32T00:00:00.000Z", "day 32"],
    ["2025-01-01T00:60:00.000Z", "minute 60"],
    ["2025-01-01T00:00:00.000", "no offset"],
    ["2025-1-01T00:00:00.000Z", "a one-digit month"],
    ["not a date", "text"],
    ["", "empty"],
  ])("%s is refused: %s", (value) => {
    expect(dateTime(value)).toBe(false);
  });
});
