/**
 * Money is integer cents end to end; decimals exist only at the JSON edge. A JSON number
 * reaches us as a double, so we read it back through its shortest round-trip text (what
 * the client wrote, e.g. "19.99") and parse that text: no float multiplication is involved.
 */

/** At most 8 integer digits and 2 fraction digits: DECIMAL(10,2). */
const DECIMAL_10_2 = /^(\d{1,8})(?:\.(\d{1,2}))?$/;

/** Exact cents of a non-negative decimal with at most 2 fraction digits, or undefined. */
export function toCents(value: number | string): number | undefined {
  const text = typeof value === "number" ? String(value) : value.trim();
  const match = DECIMAL_10_2.exec(text);
  if (!match) return undefined;
  return Number(match[1]) * 100 + Number((match[2] ?? "").padEnd(2, "0"));
}

/** Cents as a JSON number: 1999 → 19.99 (the nearest double, printed with at most 2 decimals). */
export const fromCents = (cents: number): number => Number((cents / 100).toFixed(2));
