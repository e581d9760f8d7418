/** TypeBox shapes of the audit log API. */
import { t, type Static } from "elysia";
import { MAX_PAGE } from "../../validation";

export const AuditEntry = t.Object(
  {
    id: t.Integer(),
    action: t.String({ description: "e.g. USER_CREATED" }),
    actor: t.String({ description: 'E-mail of the caller, or "system"' }),
    subjectType: t.String(),
    subjectId: t.String(),
    details: t.Nullable(t.Record(t.String(), t.Unknown())),
    createdAt: t.String({ format: "date-time" }),
  },
  { title: "AuditEntry" },
);
export type AuditEntry = Static<typeof AuditEntry>;

export const AuditQuery = t.Object({
  page: t.Optional(t.Integer({ minimum: 0, maximum: MAX_PAGE, default: 0 })),
  size: t.Optional(t.Integer({ minimum: 1, maximum: 100, default: 20 })),
  action: t.Optional(t.String({ maxLength: 64 })),
});
export type AuditQuery = Static<typeof AuditQuery>;
