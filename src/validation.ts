/**
 * Turns TypeBox failures into the interface's `<field.path>: <message>` lines, all at once.
 *
 * A schema names its own texts with `messages` (one MessageKey per kind of rule), and a
 * rule TypeBox cannot express (confirmPassword equals password, a date in the past) is a
 * `refine` function on the object schema: both run whether or not TypeBox found other
 * problems, so a client sees every violation in one answer.
 */
import { type TSchema, t } from "elysia";
import { ValueErrorType, type ValueError } from "@sinclair/typebox/errors";
import { Value } from "@sinclair/typebox/value";
import { FormatRegistry, Kind, Type, TypeRegistry, type IntegerOptions, type SchemaOptions, type StringOptions, type TUnsafe } from "@sinclair/typebox";
import { TypeCompiler, type TypeCheck } from "@sinclair/typebox/compiler";
import type { MessageKey } from "./catalogue";

export type RuleKind = "required" | "type" | "blank" | "pattern" | "format" | "minLength" | "maxLength" | "minimum" | "maximum" | "minItems" | "maxItems" | "enum";

export type FieldMessages = Partial<Record<RuleKind, MessageKey>>;

export interface Violation {
  /** Dot path of the field, e.g. "address.zipCode". */
  path: string;
  key: MessageKey;
  params?: Record<string, string | number>;
}

/** A cross-field rule; receives the raw object, whose fields may be of any shape. */
export type Refinement = (value: Record<string, unknown>) => Violation[];

// The options every schema may carry (TypeBox itself ignores them), typed once for t.* and Type.*.
declare module "@sinclair/typebox" {
  interface SchemaOptions {
    /** Our text per kind of rule, instead of the generic one. */
    messages?: FieldMessages;
    /** Rules across fields of an object: run for every route whose body schema declares one (src/http/refinements.ts). */
    refine?: Refinement;
  }
}

/**
 * A validation failure found by a service (a rule no schema can check, e.g. a Luhn digit):
 * answered like a schema failure, 400 with `errors` and no errorCode.
 */
export class Violations extends Error {
  constructor(
    readonly on: "body" | "params",
    readonly violations: Violation[],
  ) {
    super("validation");
  }
}

/** yyyy-MM-dd, or an ISO 8601 date-time (with Z or an offset; without one it is read as UTC). */
const INSTANT_PATTERN = "^\\d{4}-\\d{2}-\\d{2}(T\\d{2}:\\d{2}(:\\d{2}(\\.\\d{1,9})?)?(Z|[+-]\\d{2}:\\d{2})?)?$";

/**
 * The longest text any field without a tighter limit of its own accepts. TypeBox checks a
 * string's length before its pattern and format, so a field with a pattern needs a length
 * limit for a huge value (a 1.8 MB e-mail) to be refused before any regular expression reads it.
 */
export const MAX_TEXT_LENGTH = 10_000;

/** A string with a pattern, at most MAX_TEXT_LENGTH long unless told; too long a value gets the pattern's text. */
export const PatternString = (options: Parameters<typeof t.String>[0] & { pattern: string }) =>
  t.String({ maxLength: MAX_TEXT_LENGTH, ...options, messages: { maxLength: options.messages?.pattern, ...options.messages } });

export const Instant = PatternString({
  pattern: INSTANT_PATTERN,
  maxLength: 64,
  messages: { pattern: "field.instant" },
  description: "yyyy-MM-dd (the start of that day, UTC) or an ISO 8601 date-time",
});

/** The instant an Instant parameter names; `param` names it in the error for a day that does not exist (2025-02-30). */
export function parseInstant(value: string, param: string): Date {
  const day = value.slice(0, 10);
  const calendarDay = new Date(`${day}T00:00:00Z`);
  // JS dates keep milliseconds: finer fractions are cut, a missing offset means UTC.
  const time = value.slice(10).replace(/(\.\d{3})\d+/, "$1");
  const instant = time === "" ? calendarDay : new Date(day + (/(Z|[+-]\d{2}:\d{2})$/.test(time) ? time : `${time}Z`));
  // Date rolls 2025-02-30 over into March; the round trip catches it.
  if (Number.isNaN(instant.getTime()) || Number.isNaN(calendarDay.getTime()) || calendarDay.toISOString().slice(0, 10) !== day) {
    throw new Violations("params", [{ path: param, key: "field.instant" }]);
  }
  return instant;
}

/**
 * The "date-time" format every answer's instants are checked against, fast for the form they are
 * written in. Elysia's check (a quote-stripping replace, an unanchored three-way regex, a Date
 * parse) took ~320 ns an instant, ~5 µs of a 10-user page. toISOString's form is valid by its
 * digits alone (~60 ns) for every day a month always has: up to 28, the 29th and 30th but in
 * February, the 31st of the long months (a slower check on those days made the answers' figures
 * depend on the date). 29 February and every other string go to Elysia's check, so the set of
 * accepted strings is exactly Elysia's.
 */
const CANONICAL_INSTANT = /^\d{4}-(?:(?:0[1-9]|1[0-2])-(?:0[1-9]|1\d|2[0-8])|(?:0[13-9]|1[0-2])-(?:29|30)|(?:0[13578]|1[02])-31)T(?:[01]\d|2[0-3]):[0-5]\d:[0-5]\d\.\d{3}Z$/;
const elysiaDateTime = FormatRegistry.Get("date-time");
if (elysiaDateTime) FormatRegistry.Set("date-time", (value) => CANONICAL_INSTANT.test(value) || elysiaDateTime(value));

/**
 * Query integers and booleans checked on their text, with no TypeBox Transform.
 *
 * Elysia reads a query t.Integer or t.Boolean through a Transform, and Elysia 1.4.30 emits
 * `c.query=validator.query.Decode(c.query)` twice for a query schema holding one: three checks and
 * two interpretive decode walks of the whole schema, ~10 µs of a 57 µs name search (in-process,
 * main-thread CPU). These kinds accept what Elysia's coercion accepted (an integer's text, or
 * "true"/"false"; or the number or boolean Elysia writes in as a default) in one compiled check,
 * and the route reads the value with queryInteger / queryBoolean. They carry t.Integer's and
 * t.Boolean's JSON, so the OpenAPI document does not change, and typedBranch gives the errors
 * the same typed schema as before.
 */
const QUERY_INTEGER = "QueryInteger";
const QUERY_BOOLEAN = "QueryBoolean";

/** An integer's text as Elysia's query coercion read it (format "integer", then `+value`). */
const integerOf = (value: unknown) => (typeof value === "string" ? (value === "" ? Number.NaN : +value) : value);

const integerChecks = new WeakMap<object, TypeCheck<TSchema>>();
TypeRegistry.Set(QUERY_INTEGER, (schema: TSchema, value: unknown) => {
  let check = integerChecks.get(schema);
  if (!check) {
    check = TypeCompiler.Compile({ ...schema, [Kind]: "Integer" } as TSchema);
    integerChecks.set(schema, check);
  }
  return check.Check(integerOf(value));
});
TypeRegistry.Set(QUERY_BOOLEAN, (_schema: TSchema, value: unknown) => value === true || value === false || value === "true" || value === "false");

/** A query integer: its text (or its default) until queryInteger reads it. */
export const QueryInteger = (options: IntegerOptions = {}): TUnsafe<number | string> => Type.Unsafe({ ...Type.Integer(options), [Kind]: QUERY_INTEGER });
/** A query boolean: "true", "false" (or its default) until queryBoolean reads it. */
export const QueryBoolean = (options: SchemaOptions = {}): TUnsafe<boolean | string> => Type.Unsafe({ ...Type.Boolean(options), [Kind]: QUERY_BOOLEAN });

/**
 * An answer's text that may be null, written as the OpenAPI document already wrote
 * t.Nullable(t.String()): `type: ["string", "null"]`. Elysia cleans every answer with
 * exact-mirror, which copies a union's value through a new closure and a type check per field:
 * User's three nullable fields cost ~1 µs of the ~47 of a served GET /api/users/{id} (wrk,
 * server CPU per request), and a search page pays it per user. A kind of its own is copied as it
 * is; its check is null, or the string's own (format included).
 */
const NULLABLE_STRING = "NullableString";
const stringChecks = new WeakMap<object, TypeCheck<TSchema>>();
TypeRegistry.Set(NULLABLE_STRING, (schema: TSchema, value: unknown) => {
  if (value === null) return true;
  let check = stringChecks.get(schema);
  if (!check) {
    check = TypeCompiler.Compile({ ...schema, [Kind]: "String", type: "string" } as TSchema);
    stringChecks.set(schema, check);
  }
  return check.Check(value);
});
export const NullableString = (options: StringOptions = {}): TUnsafe<string | null> => Type.Unsafe({ ...Type.String(options), [Kind]: NULLABLE_STRING, type: ["string", "null"] });

export const queryInteger = (value: number | string | undefined) => (value === undefined ? undefined : (integerOf(value) as number));
export const queryBoolean = (value: boolean | string | undefined) => (typeof value === "string" ? value === "true" : value);

/**
 * The highest page number any list accepts: page × size (size ≤ 100) must stay an exact
 * integer, or SQLite's OFFSET overflows (page=1e20 was a 500 on every list).
 */
export const MAX_PAGE = Math.floor(Number.MAX_SAFE_INTEGER / 100);

const NOT_BLANK = "\\S";

/** A string that must contain a non-space character; its "blank" text comes from `messages.blank`. */
export function NotBlankString(options: Parameters<typeof t.String>[0] = {}) {
  const { messages, ...rest } = options;
  return t.String({ maxLength: MAX_TEXT_LENGTH, ...rest, pattern: rest.pattern ?? NOT_BLANK, messages: { pattern: messages?.blank, ...messages } });
}

/**
 * A web address a client will render as a link or an image (avatarUrl): http or https only, so
 * `javascript:`, `data:` and the like never reach a page. A pattern, not a format: the OpenAPI
 * document shows clients the same rule.
 */
export const HttpUrl = (options: Omit<Parameters<typeof t.String>[0] & object, "pattern"> = {}) =>
  t.String({ ...options, pattern: "^[Hh][Tt][Tt][Pp][Ss]?://\\S+$", messages: { pattern: "field.url", ...options.messages } });

const KIND_OF: Partial<Record<ValueErrorType, RuleKind>> = {
  [ValueErrorType.ObjectRequiredProperty]: "required",
  [ValueErrorType.StringMinLength]: "minLength",
  [ValueErrorType.StringMaxLength]: "maxLength",
  [ValueErrorType.StringPattern]: "pattern",
  [ValueErrorType.StringFormat]: "format",
  [ValueErrorType.NumberMinimum]: "minimum",
  [ValueErrorType.NumberExclusiveMinimum]: "minimum",
  [ValueErrorType.IntegerMinimum]: "minimum",
  [ValueErrorType.IntegerExclusiveMinimum]: "minimum",
  [ValueErrorType.NumberMaximum]: "maximum",
  [ValueErrorType.NumberExclusiveMaximum]: "maximum",
  [ValueErrorType.IntegerMaximum]: "maximum",
  [ValueErrorType.IntegerExclusiveMaximum]: "maximum",
  [ValueErrorType.ArrayMinItems]: "minItems",
  [ValueErrorType.ArrayMaxItems]: "maxItems",
};

function generic(kind: RuleKind | undefined, error: ValueError): Violation["key"] {
  switch (kind) {
    case "required":
      return "field.required";
    case "minLength":
      return "field.minLength";
    case "maxLength":
      return "field.maxLength";
    case "minimum":
      return "field.minimum";
    case "maximum":
      return "field.maximum";
    case "minItems":
      return "field.minItems";
    case "maxItems":
      return "field.maxItems";
    case "pattern":
    case "format":
      return "field.invalid";
    default:
      return error.schema.enum || error.schema.anyOf ? "field.enum" : "field.type";
  }
}

function paramsOf(kind: RuleKind | undefined, error: ValueError): Record<string, string | number> {
  const s = error.schema;
  switch (kind) {
    case "minLength":
      return { limit: s.minLength };
    case "maxLength":
      return { limit: s.maxLength };
    case "minimum":
      return { limit: s.minimum ?? s.exclusiveMinimum };
    case "maximum":
      return { limit: s.maximum ?? s.exclusiveMaximum };
    case "minItems":
      return { limit: s.minItems };
    case "maxItems":
      return { limit: s.maxItems };
    default: {
      const options: unknown[] | undefined = s.enum ?? s.anyOf?.map((o: TSchema) => o.const);
      if (options) return { allowed: options.join(", ") };
      return { expected: describeType(s) };
    }
  }
}

function describeType(schema: TSchema): string {
  if (schema.type === "integer") return "an integer";
  if (schema.type === "number") return "a number";
  if (schema.type === "boolean") return "true or false";
  if (schema.type === "array") return "a list";
  if (schema.type === "object") return "an object";
  if (schema.format === "date") return "a date (yyyy-MM-dd)";
  if (schema.format === "date-time") return "a date-time (ISO 8601)";
  return "a string";
}

/** "/address/zipCode" → "address.zipCode"; "/skills/0" → "skills[0]". */
function dotPath(pointer: string): string {
  if (pointer === "") return "root";
  return pointer
    .slice(1)
    .split("/")
    .map((part) => part.replaceAll("~1", "/").replaceAll("~0", "~"))
    .reduce((acc, part) => (/^\d+$/.test(part) ? `${acc}[${part}]` : acc === "" ? part : `${acc}.${part}`), "");
}

/** Runs refinements of every object schema on the way down, so nested ones count too. */
function refinements(schema: TSchema, value: unknown, prefix: string, out: Violation[]) {
  if (!value || typeof value !== "object") return;
  if (schema.refine) {
    for (const v of schema.refine(value as Record<string, unknown>)) out.push({ ...v, path: prefix ? `${prefix}.${v.path}` : v.path });
  }
  if (schema.type === "object" && schema.properties) {
    for (const [name, child] of Object.entries(schema.properties as Record<string, TSchema>)) {
      refinements(child, (value as Record<string, unknown>)[name], prefix ? `${prefix}.${name}` : name, out);
    }
  }
}

/** Whether a schema or any object inside it declares `refine` rules. */
export function hasRefinements(schema: TSchema): boolean {
  if (schema.refine) return true;
  return schema.type === "object" && Object.values((schema.properties ?? {}) as Record<string, TSchema>).some(hasRefinements);
}

/**
 * The `refine` rules alone. Elysia checks only the TypeBox part of a body, so the refinements
 * hook runs these once TypeBox has accepted it (the errors plugin runs both when TypeBox failed).
 */
export function refinementViolationsOf(schema: TSchema, value: unknown): Violation[] {
  const out: Violation[] = [];
  refinements(schema, value, "", out);
  return out;
}

/**
 * Elysia widens query and path numbers/booleans to `anyOf: [string (format integer…), integer]`
 * so it can coerce them; for messages we want the typed branch, with the raw string converted.
 */
function typedBranch(schema: TSchema): TSchema {
  if (schema[Kind] === QUERY_INTEGER) return { ...schema, [Kind]: "Integer" } as TSchema;
  if (schema[Kind] === QUERY_BOOLEAN) return { ...schema, [Kind]: "Boolean" } as TSchema;
  if (schema.anyOf?.length === 2) {
    const coercible = schema.anyOf.find((s: TSchema) => s.type === "string" && ["integer", "numeric", "number", "boolean"].includes(s.format));
    const typed = schema.anyOf.find((s: TSchema) => s !== coercible);
    if (coercible && typed) {
      const { anyOf: _anyOf, ...outer } = schema;
      return { ...outer, ...typed } as TSchema;
    }
  }
  if (schema.type === "object" && schema.properties) {
    const properties = Object.fromEntries(Object.entries(schema.properties as Record<string, TSchema>).map(([k, v]) => [k, typedBranch(v)]));
    return { ...schema, properties } as TSchema;
  }
  if (schema.type === "array" && schema.items) return { ...schema, items: typedBranch(schema.items) } as TSchema;
  return schema;
}

/** Violations of query or path parameters given as strings (repeated query keys as arrays). */
export function parameterViolationsOf(schema: TSchema, raw: Record<string, unknown>): Violation[] {
  const typed = typedBranch(schema);
  const value = Value.Convert(asNumbers(typed), structuredClone(raw)) as Record<string, unknown>;
  // Value.Convert reads "1" and "TRUE" as true, but a query boolean is "true" or "false": the
  // request failed on such a text, so it must be the text that is judged (else errors is empty).
  for (const [key, property] of Object.entries((typed.properties ?? {}) as Record<string, TSchema>)) {
    if (property.type === "boolean" && typeof raw[key] === "string" && raw[key] !== "true" && raw[key] !== "false") value[key] = raw[key];
  }
  return violationsOf(typed, value);
}

/** Converting "1.5" for an integer schema would truncate it to a valid 1: convert to a number, then check. */
function asNumbers(schema: TSchema): TSchema {
  if (schema.type === "integer") return { ...schema, [Kind]: "Number", type: "number" } as TSchema;
  if (schema.type === "object" && schema.properties) {
    const properties = Object.fromEntries(Object.entries(schema.properties as Record<string, TSchema>).map(([k, v]) => [k, asNumbers(v)]));
    return { ...schema, properties } as TSchema;
  }
  return schema;
}

/** Where a dot path ("address.zipCode", "skills[1]") sits in the schema: property and item indexes along it. */
function fieldOrder(schema: TSchema, path: string): number[] {
  const out: number[] = [];
  let node: TSchema | undefined = schema;
  for (const part of path.split(/\.|(?=\[)/)) {
    const item = /^\[(\d+)\]$/.exec(part);
    if (item) {
      out.push(Number(item[1]));
      node = node?.items;
    } else {
      const keys = Object.keys(node?.properties ?? {});
      out.push(keys.includes(part) ? keys.indexOf(part) : keys.length);
      node = node?.properties?.[part];
    }
  }
  return out;
}

function compareOrder(a: number[], b: number[]): number {
  for (let i = 0; i < Math.min(a.length, b.length); i++) if (a[i] !== b[i]) return a[i] - b[i];
  return a.length - b.length;
}

/** X of a t.Nullable(X) schema (`anyOf: [X, null]`), else undefined. */
function nullableBranch(schema: TSchema): TSchema | undefined {
  const branches: TSchema[] | undefined = schema.anyOf;
  if (branches?.length !== 2 || !branches.some((b) => b.type === "null")) return undefined;
  return branches.find((b) => b.type !== "null");
}

/**
 * A hostile body (a 1 MB string where a list goes becomes a million-element list) can fail a
 * million times: the first violations say what is wrong, and counting the rest took 35 s.
 */
const MAX_VIOLATIONS = 50;
const MAX_ERRORS_SCANNED = 1000;

/**
 * `value` with every string longer than its schema's maxLength plus MAX_TEXT_LENGTH cut to one
 * character past its limit, and the paths of those strings in `over`: TypeBox's error walk runs
 * every rule of a string, so a pattern or format would otherwise read the whole of a huge value
 * after its length failed.
 */
function cutOverLength(schema: TSchema, value: unknown, path: string, over: Set<string>): unknown {
  const own = nullableBranch(schema) ?? schema;
  if (typeof value === "string") {
    if (typeof own.maxLength !== "number" || value.length <= own.maxLength + MAX_TEXT_LENGTH) return value;
    over.add(dotPath(path));
    return value.slice(0, own.maxLength + 1);
  }
  const cut = (child: TSchema, field: unknown, at: string) => cutOverLength(child, field, at, over);
  if (Array.isArray(value)) return own.items ? value.map((item, i) => cut(own.items, item, `${path}/${i}`)) : value;
  if (!value || typeof value !== "object" || !own.properties) return value;
  const properties = own.properties as Record<string, TSchema>;
  return Object.fromEntries(Object.entries(value).map(([key, field]) => [key, properties[key] ? cut(properties[key], field, `${path}/${key}`) : field]));
}

/**
 * The violations of a value holding a string far over its maxLength (else undefined), found
 * without running any pattern or format on such a string: a gate before TypeBox's own check,
 * whose failure report reads every rule of the whole value. "Far" is MAX_TEXT_LENGTH past the
 * limit (a route's transform may still trim a value into it: a name in spaces).
 */
export function overLengthViolations(widened: TSchema, value: unknown): Violation[] | undefined {
  const over = new Set<string>();
  cutOverLength(typedBranch(widened), value, "", over);
  return over.size > 0 ? violationsOf(widened, value) : undefined;
}

/**
 * The violations of `value` against `schema` (at most MAX_VIOLATIONS), in field order, without
 * duplicates. A string far over its maxLength (by MAX_TEXT_LENGTH) is refused for its length
 * alone: its pattern and format never read it. One just over keeps the seed's answer (length and
 * pattern), the pattern reading no more than a limit's worth of text.
 */
export function violationsOf(widened: TSchema, value: unknown): Violation[] {
  // Elysia widens body integers the same way (t.Integer → anyOf [numeric string, integer]).
  const schema = typedBranch(widened);
  const out: Violation[] = [];
  const seen = new Set<string>();
  const blank = new Map<string, Violation["key"]>();
  const over = new Set<string>();
  const cut = cutOverLength(schema, value, "", over);
  let scanned = 0;
  for (const error of Value.Errors(schema, cut)) {
    if (out.length >= MAX_VIOLATIONS || ++scanned > MAX_ERRORS_SCANNED) break;
    // t.Nullable(X) fails as a whole union: a value that is not null is judged by X, with X's own texts.
    const nonNull = error.value !== null && error.value !== undefined ? nullableBranch(error.schema) : undefined;
    if (nonNull) {
      const at = dotPath(error.path);
      for (const v of violationsOf(nonNull, error.value)) out.push({ ...v, path: v.path === "root" ? at : `${at}.${v.path}` });
      continue;
    }
    // A field no schema names is ignored, as the seed (Spring) ignores it: never a violation either.
    if (error.type === ValueErrorType.ObjectAdditionalProperties) continue;
    // Elysia's body normalisation gives absent properties an own `undefined` value, which
    // TypeBox reports as a wrong type rather than a missing property: both mean "required".
    const kind = error.value === undefined && error.path !== "" ? "required" : KIND_OF[error.type];
    const messages = error.schema.messages;
    const key = messages?.[kind ?? "type"] ?? generic(kind, error);
    const path = dotPath(error.path);
    if ((kind === "pattern" || kind === "format") && over.has(path)) continue;
    if (kind === "pattern" && error.schema.pattern === NOT_BLANK) blank.set(path, key);
    const id = `${path}:${key}`;
    if (seen.has(id)) continue;
    seen.add(id);
    out.push({ path, key, params: paramsOf(kind, error) });
  }
  // A blank value is reported as blank only, not also as too short or badly formatted.
  const result = out.filter((v) => !blank.has(v.path) || blank.get(v.path) === v.key);
  // TypeBox names missing properties before the others: report in the schema's field order.
  const order = new Map(result.map((v) => [v, fieldOrder(schema, v.path)]));
  result.sort((a, b) => compareOrder(order.get(a)!, order.get(b)!));
  refinements(schema, value, "", result);
  return result;
}
