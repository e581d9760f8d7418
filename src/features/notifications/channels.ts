/**
 * The two delivery channels of the outbox. The webhook channel POSTs the notification as JSON
 * (signed per Standard Webhooks when a secret is set), or logs its id and kind when no URL is
 * configured. The mail channel renders the template in the recipient's language and sends it
 * over SMTP with nodemailer. A channel either resolves ("sent" or "skipped": nothing to send)
 * or throws, and the sender retries it.
 */
import { createHmac } from "node:crypto";
import type { Transporter } from "nodemailer";
import type { Logger } from "pino";
import type { Config } from "../../config";
import type { Reader } from "../../db/database";
import type { Lang } from "../../i18n";
import { MAILED_SECRET_LIFETIMES } from "../../store/account-tokens";
import type { ChannelName, NotificationKind, Outcome, OutboxRow } from "../../store/outbox";
import { greetingOf } from "../../store/users";
import { renderMail } from "./templates";

export interface Channel {
  name: ChannelName;
  deliver(row: OutboxRow): Promise<Outcome>;
}

/** Standard Webhooks: `v1,` + base64 HMAC-SHA256 over `id.timestamp.body`, keyed with the secret's bytes. */
export function signWebhook(secret: string, id: string, timestampSeconds: number, body: string) {
  const key = Buffer.from(secret.replace(/^whsec_/, ""), "base64");
  return `v1,${createHmac("sha256", key).update(`${id}.${timestampSeconds}.${body}`).digest("base64")}`;
}

export interface WebhookOptions {
  url?: string;
  secret?: string;
  timeoutMs: number;
  logger: Logger;
  now: () => number;
}

export function webhookChannel({ url, secret, timeoutMs, logger, now }: WebhookOptions): Channel {
  return {
    name: "webhook",
    async deliver(row) {
      if (!url) {
        // Without a receiver the log stands in for it: by id and kind, never the address or payload.
        logger.info({ outboxId: row.id, kind: row.kind }, "notification");
        return "sent";
      }
      const body = JSON.stringify({ id: row.id, kind: row.kind, recipient: row.recipient, payload: row.payload, createdAt: row.createdAt.toISOString() });
      const id = String(row.id);
      const headers: Record<string, string> = { "content-type": "application/json", "idempotency-key": `outbox-${row.id}` };
      if (row.traceparent) headers.traceparent = row.traceparent;
      if (secret) {
        const timestamp = Math.floor(now() / 1000);
        Object.assign(headers, { "webhook-id": id, "webhook-timestamp": String(timestamp), "webhook-signature": signWebhook(secret, id, timestamp, body) });
      }
      const response = await fetch(url, { method: "POST", headers, body, signal: AbortSignal.timeout(timeoutMs) });
      await response.body?.cancel();
      if (!response.ok) throw new Error(`webhook answered ${response.status}`);
      return "sent";
    },
  };
}

export interface MailOptions {
  db: Reader;
  /** smtp://user:pass@host:587 or smtps://…:465 */
  smtpUrl: string;
  from: string;
  /** PUBLIC_URL + BASE_PATH, for links; undefined: the mail gives the token. */
  publicBase?: string;
  timeoutMs: number;
}

export function mailChannel({ db, smtpUrl, from, publicBase, timeoutMs }: MailOptions): Channel & { close(): void } {
  // nodemailer loads on the first mail, not at every start.
  let transport: Promise<Transporter> | undefined;
  const transportOf = () =>
    (transport ??= import("nodemailer").then(({ default: nodemailer }) => {
      const created = nodemailer.createTransport(smtpUrl, { from });
      // nodemailer's own defaults wait minutes for a silent server; an attempt must end well inside the lease.
      Object.assign(created.options, { connectionTimeout: timeoutMs, greetingTimeout: timeoutMs, socketTimeout: timeoutMs });
      return created;
    }));
  const domain = /@([^>\s]+)>?\s*$/.exec(from)?.[1] ?? "usersvc.invalid";
  return {
    name: "mail",
    async deliver(row) {
      if (!row.recipient) return "skipped";
      const kind = row.kind as NotificationKind;
      if (kind in MAILED_SECRET_LIFETIMES && !row.token) throw new GiveUp("the token expired before the mail could be sent");
      const payload = row.payload as Record<string, unknown>;
      const userId = typeof payload.userId === "number" ? payload.userId : undefined;
      const user = userId === undefined ? undefined : await greetingOf(db, userId);
      // A name typed at registration reaches only an address its owner confirmed: anyone can register anyone's address.
      const name = user?.emailVerified ? user.name : "";
      const mail = renderMail({
        kind,
        lang: (user?.language ?? "en") as Lang,
        name,
        payload,
        token: row.token ?? undefined,
        publicBase,
      });
      // The same Message-ID on every attempt lets a mailbox recognise a repeat.
      await (await transportOf()).sendMail({
        to: row.recipient,
        ...mail,
        messageId: `<outbox-${row.id}.${row.createdAt.getTime()}@${domain}>`,
        headers: { "x-usersvc-outbox-id": String(row.id) },
      });
      return "sent";
    },
    close: () => void transport?.then((created) => created.close()),
  };
}

/** A failure that no retry can mend: the channel is marked failed at once. */
export class GiveUp extends Error {}

/** The channels the configuration asks for: the webhook (or the log) always, mail with SMTP_URL. */
export function channelsFor(
  config: Pick<Config, "notifyWebhookUrl" | "notifyWebhookSecret" | "smtpUrl" | "mailFrom" | "publicUrl" | "basePath">,
  db: Reader,
  logger: Logger,
  now: () => number = Date.now,
) {
  const timeoutMs = 10_000;
  const channels: (Channel & { close?(): void })[] = [webhookChannel({ url: config.notifyWebhookUrl, secret: config.notifyWebhookSecret, timeoutMs, logger, now })];
  if (config.smtpUrl) {
    const publicBase = config.publicUrl ? config.publicUrl + config.basePath : undefined;
    channels.push(mailChannel({ db, smtpUrl: config.smtpUrl, from: config.mailFrom, publicBase, timeoutMs }));
  }
  return channels;
}
