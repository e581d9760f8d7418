/** Feature folder notifications/: delivering the outbox (the sender, its webhook and mail channels, the mail templates) and GET /api/admin/outbox. */
/**
 * GET /api/admin/outbox (ADMIN): the notifications and each channel's delivery state, so an
 * ADMIN sees what was sent, what still waits and what failed for good, with its last error.
 * Payloads and tokens are not shown.
 */
import { Elysia, t, type Static } from "elysia";
import { pageOf } from "../../paging";
import type { AppContext } from "../../context";
import type { Reader } from "../../db/database";
import { readOutbox, type OutboxRow } from "../../store/outbox";
import { documentedHeaders, errorResponses } from "../../http/route-docs";
import { MAX_PAGE } from "../../validation";

const STATUSES = ["pending", "sent", "failed", "skipped", "resolving"] as const;

const ChannelState = t.Object({
  status: t.UnionEnum(STATUSES),
  attempts: t.Integer(),
  lastError: t.Nullable(t.String()),
  sentAt: t.Nullable(t.String({ format: "date-time" })),
  nextAttemptAt: t.Nullable(t.String({ format: "date-time", description: "When a pending channel tries again" })),
});

export const OutboxEntry = t.Object(
  {
    id: t.Integer({ description: "Also the webhook-id of its webhook deliveries" }),
    kind: t.String({
      description: "WELCOME, VERIFY_EMAIL, PASSWORD_RESET, PASSWORD_CHANGED, EMAIL_CHANGED, USER_UPDATED, ORDER_CREATED, PAYMENT_SUCCESS, PAYMENT_FAILED, API_KEY_CREATED",
    }),
    recipient: t.Nullable(t.String()),
    createdAt: t.String({ format: "date-time" }),
    webhook: ChannelState,
    mail: ChannelState,
  },
  { title: "OutboxEntry" },
);
type OutboxEntry = Static<typeof OutboxEntry>;

const OutboxQuery = t.Object({
  page: t.Optional(t.Integer({ minimum: 0, maximum: MAX_PAGE, default: 0 })),
  size: t.Optional(t.Integer({ minimum: 1, maximum: 100, default: 20 })),
  status: t.Optional(t.UnionEnum(STATUSES, { description: "Only rows with this status on either channel" })),
  kind: t.Optional(t.String({ maxLength: 64 })),
});
type OutboxQuery = Static<typeof OutboxQuery>;

const iso = (date: Date | null) => date?.toISOString() ?? null;
const channel = (status: string, attempts: number, lastError: string | null, sentAt: Date | null, next: Date) => ({
  status: status as (typeof STATUSES)[number],
  attempts,
  lastError,
  sentAt: iso(sentAt),
  nextAttemptAt: status === "pending" ? next.toISOString() : null,
});

const toEntry = (row: OutboxRow): OutboxEntry => ({
  id: row.id,
  kind: row.kind,
  recipient: row.recipient,
  createdAt: row.createdAt.toISOString(),
  webhook: channel(row.webhookStatus, row.webhookAttempts, row.webhookLastError, row.webhookSentAt, row.webhookNextAttemptAt),
  mail: channel(row.mailStatus, row.mailAttempts, row.mailLastError, row.mailSentAt, row.mailNextAttemptAt),
});

/** Newest first, one page (default page 0 of 20). */
export async function listOutbox(db: Reader, query: OutboxQuery) {
  const { rows, total } = await readOutbox(db, query, pageOf(query));
  return { entries: rows.map(toEntry), total };
}

export const outboxRoutes = (ctx: AppContext) =>
  new Elysia({ prefix: "/api/admin/outbox", tags: ["Notifications"] }).use(ctx.auth).get(
    "",
    async ({ query, set }) => {
      const { entries, total } = await listOutbox(ctx.db, query);
      set.headers["x-total-count"] = String(total);
      return entries;
    },
    {
      access: { allow: "ADMIN" },
      sample: () => ({ path: "/api/admin/outbox", status: 200 }),
      query: OutboxQuery,
      response: { 200: t.Array(OutboxEntry), ...errorResponses(400, 401, 403) },
      detail: {
        summary: "The notification outbox and each channel's delivery state",
        description:
          "Newest first, paged; `status=failed` lists the notifications a channel gave up on, with the last error (also counted in notifications_failed_total). Total in X-Total-Count.",
        ...documentedHeaders({ 200: ["X-Total-Count"] }),
      },
    },
  );
