/**
 * Answers as tests read them: parsed JSON with its status, headers and text. No bun:test here,
 * so bench/ and the server-process kit can use it too.
 */

/**
 * A parsed JSON answer a test reads without naming its type. The one `any` left in test/: a
 * test reads the answers of ~60 routes, ~400 times, field by field, and every answer is
 * already checked against the OpenAPI document at run time (conform, in test/helpers.ts). Where a test
 * wants the compiler's help it names the type: `request<User[]>(…)`.
 */
// biome-ignore lint/suspicious/noExplicitAny: see above
export type Answer = any;

/** The JSON of a Response made outside request() (a real port, a raw app.handle), as the type the test names. */
export const jsonOf = <T>(response: Response): Promise<T> => response.json() as Promise<T>;

/** A Response made outside request() as request() answers it, for expectFailure and scenario rows. */
export async function answerOf<T = Answer>(response: Response): Promise<TestResponse<T>> {
  const text = await response.text();
  return { status: response.status, headers: response.headers, body: (text ? JSON.parse(text) : undefined) as T, text };
}

export interface TestResponse<T = Answer> {
  status: number;
  headers: Headers;
  body: T;
  text: string;
}
