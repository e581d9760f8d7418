/**
 * Error cases as table rows, after PocketBase's ApiScenario (tests/api.go): each row is the
 * request, the status, the error envelope (or the whole body) expected, text that must not
 * appear anywhere in the answer, and state the request must leave as it was.
 * `scenarios(rows)` runs each row as its own test.
 */
import { expect, test } from "./legs";
import { ISO_Z, type TestResponse } from "./helpers";

/** What an error answer must say; an absent `message` may be any text, absent `errorCode`/`errors` must be absent. */
export interface Failure {
  message?: string;
  errorCode?: string;
  errors?: string[];
  /** Headers the answer must carry (e.g. WWW-Authenticate on a 401). */
  headers?: Record<string, string>;
}

/** The whole error envelope, exactly: `{ success: false, message, errorCode?, errors?, timestamp }`, as JSON with an X-Request-Id. */
export function expectFailure(res: Pick<TestResponse, "status" | "body" | "headers">, status: number, failure: Failure = {}) {
  expect(res.status).toBe(status);
  expect(res.headers.get("content-type")).toStartWith("application/json");
  expect(res.headers.get("x-request-id")).toBeTruthy();
  const envelope: Record<string, unknown> = { success: false, message: failure.message ?? expect.any(String), timestamp: expect.stringMatching(ISO_Z) };
  if (failure.errorCode !== undefined) envelope.errorCode = failure.errorCode;
  if (failure.errors !== undefined) envelope.errors = failure.errors;
  expect(res.body).toEqual(envelope);
  for (const [name, value] of Object.entries(failure.headers ?? {})) expect(res.headers.get(name)).toBe(value);
}

/** The guard's refusal of a request without a valid token. */
export const UNAUTHORIZED: Failure = { message: "Authentication is required to access this resource", errorCode: "UNAUTHORIZED", headers: { "www-authenticate": "Bearer" } };

/** The guard's refusal of a caller without the role (or not the user themself). */
export const DENIED: Failure = { message: "You do not have permission to perform this operation", errorCode: "ACCESS_DENIED" };

/** A body that failed validation: 400, no errorCode, exactly these `errors`. */
export const invalidBody = (errors: string[], message = "Data validation failed"): Failure => ({ message, errors });

/** Query or path parameters that failed validation: 400, no errorCode, exactly these `errors`. */
export const invalidParams = (errors: string[], message = "Parameter validation failed"): Failure => ({ message, errors });

export interface Scenario {
  name: string;
  /** Sends the request when the row runs, so it may use tokens and records made in beforeAll. */
  send: () => Promise<TestResponse>;
  status: number;
  /** The error envelope expected (see Failure)… */
  failure?: Failure;
  /** …or the whole body (a row that names `body: undefined` expects none, as a 204 has). */
  body?: unknown;
  /** Text the raw answer must not contain (a hash, a stack trace, another user's e-mail). */
  absent?: string[];
  /** State read before and after the request, which must be the same (a refusal leaves nothing behind). */
  unchanged?: () => Promise<unknown>;
}

/** Each row as a test named `<name> → <status> [<errorCode>]`. */
export function scenarios(rows: Scenario[]) {
  for (const row of rows) {
    test(`${row.name} → ${row.status}${row.failure?.errorCode ? ` ${row.failure.errorCode}` : ""}`, async () => {
      const before = await row.unchanged?.();
      const res = await row.send();
      if (row.failure || !("body" in row)) expectFailure(res, row.status, row.failure);
      else {
        expect(res.status).toBe(row.status);
        expect(res.body).toEqual(row.body);
      }
      for (const text of row.absent ?? []) expect(res.text).not.toContain(text);
      if (row.unchanged) expect(await row.unchanged()).toEqual(before);
    });
  }
}
