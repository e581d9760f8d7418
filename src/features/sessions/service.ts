/**
 * Listing and ending sessions: the caller's own (self-service) and any user's (ADMIN). Ending a
 * session refuses its access and refresh tokens at once; audited SESSION_ENDED.
 */
import type { Config } from "../../config";
import type { Database } from "../../db/database";
import { AppError } from "../../errors";
import type { Caller } from "../../security/caller";
import { auditStatement } from "../../store/audit";
import { endOtherSessionsStatement, endSessionStatement, openSessionsOf } from "../../store/sessions";
import { userExists } from "../../store/users";
import type { Session } from "./model";

export interface SessionsDeps {
  db: Database;
  now: () => number;
  config: Pick<Config, "sessionIdleTimeoutMs">;
}

/** The user's open sessions, the most recently active first; `current` marks the caller's. */
export async function listSessions(deps: SessionsDeps, userId: number, caller: Caller): Promise<Session[]> {
  const rows = await openSessionsOf(deps.db, userId, deps.now(), deps.config.sessionIdleTimeoutMs);
  return rows.map((row) => ({
    ...row,
    amr: row.amr.split(","),
    createdAt: row.createdAt.toISOString(),
    lastSeenAt: row.lastSeenAt.toISOString(),
    expiresAt: row.expiresAt.toISOString(),
    current: row.id === caller.session?.id,
  }));
}

/** The user's sessions as an ADMIN lists them: 404 USER_NOT_FOUND for a missing user. */
export async function listUserSessions(deps: SessionsDeps, userId: number, caller: Caller): Promise<Session[]> {
  if (!(await userExists(deps.db, userId))) throw new AppError("USER_NOT_FOUND", { id: userId });
  return listSessions(deps, userId, caller);
}

/** Ends one of the user's sessions: 404 SESSION_NOT_FOUND when it is not theirs, unknown or over. */
export async function endSession(deps: SessionsDeps, userId: number, sessionId: string, caller: Caller) {
  const now = new Date(deps.now());
  const audit = { action: "SESSION_ENDED", actor: caller.email, subjectType: "User", subjectId: userId, details: { sessionId } };
  await deps.db.write(async (tx) => {
    const ended = await endSessionStatement(tx, userId, sessionId, now);
    if (ended.length === 0) throw new AppError("SESSION_NOT_FOUND");
    await auditStatement(tx, audit, now);
  });
}

/** Ends every session of the caller but the one their token belongs to. */
export async function endOtherSessions(deps: SessionsDeps, caller: Caller) {
  const now = new Date(deps.now());
  const audit = { action: "SESSION_ENDED", actor: caller.email, subjectType: "User", subjectId: caller.id, details: { others: true } };
  await deps.db.writeAll((tx) => [endOtherSessionsStatement(tx, caller.id, caller.session?.id, now), auditStatement(tx, audit, now)]);
}
