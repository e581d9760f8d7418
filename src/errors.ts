/**
 * One error path. Services throw AppError (or a Violations failure); errorsPlugin, registered
 * first and global, turns every error into the envelope with the interface's status codes.
 * Nothing else writes an error response.
 */
import { Elysia, ParseError, ValidationError, type TSchema } from "elysia";
import type { Logger } from "pino";
import { failure } from "./envelope";
import { ERRORS, messageOf, translate, type ErrorCode } from "./catalogue";
import { languageOf, type Lang, type TextParams } from "./i18n";
import { parameterViolationsOf, violationsOf, Violations, type Violation } from "./validation";
import type { RouteTable } from "./http/route-table";
import { peekRequestState } from "./http/request-state";
import { requestPath, requestQuery } from "./http/request-url";
import { classifyDatabaseError, integrityKind, isUnavailable } from "./db/errors";
import { redactUrl } from "./logging/redact-url";

/** Database failures are classified in src/db/errors.ts, for every driver. */
export { integrityKind };

export type { ErrorCode } from "./catalogue";
/** Violations are validation's own; services import them with AppError from here. */
export { Violations };

export interface AppErrorOptions {
  headers?: Record<string, string>;
  errors?: string[];
}

export class AppError extends Error {
  constructor(
    readonly code: ErrorCode,
    readonly params: TextParams = {},
    readonly options: AppErrorOptions = {},
  ) {
    super(code);
  }

  get status(): number {
    return ERRORS[this.code].status;
  }

  messageIn(lang: Lang): string {
    return messageOf(this.code, lang, this.params);
  }
}

export function formatViolations(violations: Violation[], lang: Lang): string[] {
  return violations.map((v) => `${v.path}: ${translate(v.key, lang, v.params)}`);
}

const INTEGRITY_MESSAGE = {
  duplicate: (lang: Lang) => translate("error.integrity.duplicate", lang),
  foreignKey: (lang: Lang) => translate("error.integrity.foreignKey", lang),
  other: (lang: Lang) => messageOf("DATA_INTEGRITY_VIOLATION", lang),
};

export interface ErrorsPluginDeps {
  logger: Logger;
  /** Unknown paths answer 401 to anonymous callers and 404 (or 405) to authenticated ones. */
  isAuthenticated(request: Request): Promise<boolean>;
  routes: RouteTable;
  /** The app's clock: an envelope's timestamp. */
  now: () => number;
}

/** The schema a failed check ran: Elysia's validator wraps it (a TypeCheck's `schema`). */
const validatorSchema = (error: ValidationError): TSchema | undefined => (error.validator as { schema?: TSchema } | undefined)?.schema;

function queryOf(url: string): Record<string, string | string[]> {
  // No prototype: a parameter named "constructor" or "__proto__" is just a name (it found
  // Object.prototype's and failed to clone it, a 500).
  const out: Record<string, string | string[]> = Object.create(null);
  for (const [key, value] of new URLSearchParams(requestQuery(url))) {
    const seen = out[key];
    out[key] = seen === undefined ? value : Array.isArray(seen) ? [...seen, value] : [seen, value];
  }
  return out;
}

export const errorsPlugin = ({ logger, isAuthenticated, routes, now }: ErrorsPluginDeps) =>
  new Elysia({ name: "errors" }).onError({ as: "global" }, async ({ code, error: raised, set, request, route, params }) => {
    // Elysia wraps whatever a body parser throws in a ParseError; our own (413, 415, a body that is not an object) keep their meaning.
    const cause = (raised as Error).cause;
    // A body held back by the parser until access was granted made the body fail validation: answer its refusal.
    const refused = code === "VALIDATION" ? peekRequestState(request)?.refusedBody : undefined;
    const kind = refused instanceof ParseError ? "PARSE" : code;
    const error = refused ?? (code === "PARSE" && (cause instanceof AppError || cause instanceof Violations) ? cause : raised);
    const lang = languageOf(request.headers.get("accept-language"));
    const envelope = (message: string, errorCode?: string, errors?: string[]) => failure(now(), message, errorCode, errors);
    const reply = (status: number, body: ReturnType<typeof failure>, headers?: Record<string, string>) => {
      set.status = status;
      if (headers) Object.assign(set.headers, headers);
      return body;
    };
    /** The envelope of a catalogue code, with the code's own status. */
    const replyCode = (code: ErrorCode, headers?: Record<string, string>) => reply(ERRORS[code].status, envelope(messageOf(code, lang), code), headers);
    /** Anything not a client's mistake: a constraint, a busy database, or a 500 with the detail only in the log. */
    const unexpected = (error: unknown) => {
      const integrity = integrityKind(error);
      if (integrity) return reply(409, envelope(INTEGRITY_MESSAGE[integrity](lang), "DATA_INTEGRITY_VIOLATION"));
      if (isUnavailable(error)) {
        logger.warn({ err: error }, `database ${classifyDatabaseError(error)}`);
        return replyCode("SERVICE_UNAVAILABLE", { "retry-after": "1" });
      }
      logger.error({ err: error, method: request.method, url: redactUrl(request.url) }, "unhandled error");
      return replyCode("INTERNAL_ERROR");
    };
    try {
      return await answer();
    } catch (failed) {
      // Classifying failed too (the database is gone while checking the caller): still an envelope.
      return unexpected(failed);
    }

    async function answer() {
      if (error instanceof AppError) {
        const errors = error.options.errors;
        return reply(error.status, envelope(error.messageIn(lang), error.code, errors), error.options.headers);
      }
      if (error instanceof Violations) {
        const key = error.on === "body" ? "validation.body" : "validation.params";
        return reply(400, envelope(translate(key, lang), undefined, formatViolations(error.violations, lang)));
      }
      if (kind === "VALIDATION" && error instanceof ValidationError) {
        if (error.type === "body") {
          const schema = validatorSchema(error) ?? (error.validator as TSchema);
          const sent = peekRequestState(request)?.sentBody;
          return reply(400, envelope(translate("validation.body", lang), undefined, formatViolations(violationsOf(schema, sent === undefined ? error.value : sent), lang)));
        }
        if (error.type === "response") {
          // A response that does not fit its schema is our bug, not the client's.
          logger.error({ err: error, route }, "response failed its schema");
          return replyCode("INTERNAL_ERROR");
        }
        // "property" is how Elysia reports one bad coerced value (a path or query number) without
        // saying whose: check the route's path parameters and its whole query, from the raw strings.
        const parts = error.type === "property" ? (["params", "query"] as const) : [error.type as "query" | "params" | "headers"];
        const violations = parts.flatMap((part) => {
          const schema = routes.schemaOf(request.method, route, part) ?? (part === error.type ? validatorSchema(error) : undefined);
          const raw = part === "query" ? queryOf(request.url) : part === "params" ? params : (error.value as Record<string, unknown>);
          return schema ? parameterViolationsOf(schema, raw ?? {}) : [];
        });
        return reply(400, envelope(translate("validation.params", lang), undefined, formatViolations(violations, lang)));
      }
      if (kind === "PARSE") return reply(400, envelope(translate("error.malformedJson", lang)));
      if (kind === "NOT_FOUND") {
        if (!(await isAuthenticated(request))) {
          return replyCode("UNAUTHORIZED", { "www-authenticate": "Bearer" });
        }
        const methods = routes.methodsFor(requestPath(request.url));
        if (methods.length > 0 && !methods.includes(request.method)) {
          return replyCode("METHOD_NOT_ALLOWED", { allow: methods.join(", ") });
        }
        return replyCode("NOT_FOUND");
      }
      return unexpected(error);
    }
  });

/**
 * The answer to what escapes the app's own handling (a failure around it, as in tracing's wrapper):
 * logged, then the 500 envelope with every answer's default headers, so no answer is ever Bun's own
 * error page (outside production, HTML with stack frames and the working directory). Bun.serve's `error`.
 */
export const escapedErrorAnswer = (logger: Logger, now: () => number, headers: Readonly<Record<string, string>>) => (error: Error) => {
  logger.error({ err: error }, "unhandled error around the app");
  return Response.json(failure(now(), messageOf("INTERNAL_ERROR", "en"), "INTERNAL_ERROR"), { status: 500, headers });
};
