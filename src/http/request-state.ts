/**
 * What one request's hooks hand to each other, in one place: Elysia runs parse, the access
 * guard, validation, the errors plugin and tracing as separate hooks, and some of them need what an
 * earlier one found. Kept beside the Request (a WeakMap, so it goes with the request): the one
 * per-request store, no module keeps another.
 */
export interface RequestState {
  /** The JSON body as the client sent it, before Elysia normalises it in place for its schema. */
  sentBody?: unknown;
  /** A body the parser refused (malformed, too large…), held back until the guard has let the caller through. */
  refusedBody?: Error;
  /** With tracing on: ends the request's span (tracing/otel.ts) once the route and status are known. */
  endSpan?: (route: string, status: number) => void;
}

const states = new WeakMap<Request, RequestState>();

/** The request's state, created empty on first use. */
export function requestState(request: Request): RequestState {
  let state = states.get(request);
  if (!state) {
    state = {};
    states.set(request, state);
  }
  return state;
}

/** The state without creating one: for readers on paths where most requests have none. */
export const peekRequestState = (request: Request): RequestState | undefined => states.get(request);
