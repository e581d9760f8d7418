/**
 * The users business layer: plain functions over the users store, usable without HTTP.
 * Every change runs in one transaction; uniqueness of e-mail is decided by the unique
 * index, so concurrent creates of one address give one user and DUPLICATE_EMAIL for the rest.
 */
import { checkedStepUp, type StepUpDeps } from "../../security/step-up";
import type { Database, Reader } from "../../db/database";
import { readForAttempt } from "../../db/miss";
import { AppError, integrityKind, Violations } from "../../errors";
import { listAnswer } from "../../http/list-answer";
import type { Metrics } from "../../metrics";
import { timed } from "../../metrics";
import { existing, type User } from "../../models/user";
import { type Page, pageIfAsked } from "../../paging";
import { type Caller, isAdmin } from "../../security/caller";
import { confirmPassword, type PasswordCheckDeps } from "../../security/password-check";
import { assertPasswordAllowed, type PasswordPolicyDeps } from "../../security/password-policy";
import { hashPassword } from "../../security/passwords";
import { auditStatement, writeAudit } from "../../store/audit";
import { enqueuedNotification } from "../../store/outbox";
import { unlockStatements } from "../../store/throttle";
import { countMatches, searchUsers, userChunks, type UserSearchCriteria } from "../../store/user-search";
import {
  createdUserRows,
  deleteUserRow,
  emailOfUser,
  emailTaken,
  findUser,
  isLastAdmin,
  listUsers as readUsers,
  normalizeEmail,
  setActiveFlag,
  tokenVersionBump,
  type ChangeSideRows,
  changeStillAt,
  type UserAt,
  type UserChanges,
  userByEmail,
  userById,
  userOf,
  versionAndEmail,
} from "../../store/users";
import type { UserBody, UserListQuery, UserPatch } from "./model";

export interface UsersDeps {
  db: Database;
  metrics: Metrics;
  logger: { warn(obj: object, msg: string): void };
  /** The app's clock (ctx.now): timestamps of users, their audit entries and notifications. */
  now: () => number;
}

/**
 * GET /api/users: every user, read and sent in chunks so memory stays flat however many there are,
 * or one page when page or size is asked; with the total of the matches either way.
 */
export async function usersFor(db: Database, query: UserListQuery): Promise<{ users: User[]; total: number }> {
  const page = pageIfAsked(query);
  if (!page) {
    const criteria = listCriteria(query);
    const [total, answer] = await Promise.all([countMatches(db, criteria), listAnswer(userChunks(db, criteria))]);
    return { users: answer as User[], total };
  }
  // The seed's list is a prepared hot path; the console's filters go through the search.
  const filtered = [query.name, query.email, query.department].some((v) => v?.trim()) || (query.active ?? "any") !== "any";
  return filtered ? filterUsers(db, query, page) : listUsers(db, page, query.sort);
}

/**
 * What PUT and PATCH need beyond the body's rules: a password is set only by an ADMIN (a user
 * changes theirs with the current one, at /api/auth/change-password), and a caller's own address
 * changes only with their current password (throttled like a login): a stolen token alone must
 * not move the account to the thief's mailbox. Their address again, in any case, needs nothing.
 */
export async function mayChange(
  deps: PasswordCheckDeps & StepUpDeps,
  caller: Caller,
  id: number,
  body: { email?: string; password?: string; currentPassword?: string; stepUpToken?: string },
  address: () => string,
) {
  if (body.password !== undefined && !isAdmin(caller)) throw new Violations("body", [{ path: "password", key: "field.password.adminOnly" }]);
  if (id !== caller.id || body.email === undefined || normalizeEmail(body.email) === caller.email) return;
  // The unit refuses a key's move anyway: this keeps the key from trying the owner's password on the way.
  if (caller.apiKey) throw new AppError("API_KEY_NOT_ALLOWED");
  // An account without a password proves it is its owner by a step-up instead (security/step-up.ts).
  if (body.currentPassword === undefined && body.stepUpToken !== undefined) return void (await deps.db.write(checkedStepUp(deps, caller, body.stepUpToken)));
  if (body.currentPassword === undefined) throw new Violations("body", [{ path: "currentPassword", key: "field.currentPassword.required" }]);
  await confirmPassword(deps, caller, body.currentPassword, address());
}

/** A page of every user, sorted (`field,direction`), with the total: the seed's prepared hot path. */
function listUsers(db: Pick<Database, "readAll">, page: Page, sort: string | undefined) {
  return readUsers(db, sort, page);
}

/** GET /api/users's criteria: the console's filters (name, email, department, active) and the sort. */
export function listCriteria(query: UserListQuery): UserSearchCriteria {
  const [sortBy, sortDirection] = (query.sort ?? "id").split(",") as [UserSearchCriteria["sortBy"], UserSearchCriteria["sortDirection"]];
  return {
    name: query.name,
    email: query.email,
    department: query.department,
    active: query.active === "true" ? true : query.active === "false" ? false : undefined,
    sortBy,
    sortDirection,
  };
}

/** A page of GET /api/users with the console's filters, sorted, with the total. Without filters the route uses listUsers. */
export async function filterUsers(db: Database, query: UserListQuery, page: Page): Promise<{ users: User[]; total: number }> {
  const criteria = listCriteria(query);
  const [found, total] = await Promise.all([searchUsers(db, criteria, page), countMatches(db, criteria)]);
  return { users: found, total };
}

/** A unique-index failure on users.email, whichever statement hit it. */
function duplicateEmail(error: unknown, email: string) {
  return integrityKind(error) === "duplicate" ? new AppError("DUPLICATE_EMAIL", { email }) : error;
}

export async function createUser(deps: UsersDeps & PasswordPolicyDeps, input: UserBody, actor: string): Promise<User> {
  return timed(deps.metrics, "create", async () => {
    const email = normalizeEmail(input.email);
    const name = input.name.trim();
    const department = input.department?.trim() || undefined;
    if (input.password) await assertPasswordAllowed(deps, input.password, email);
    const passwordHash = input.password ? await hashPassword(input.password) : null;
    const now = new Date(deps.now());
    try {
      // One list unit (one round trip to a remote primary): the user, its role, the welcome and
      // the audit row commit together, and the user is read back. The unique index on e-mail
      // decides a duplicate, also between concurrent creates.
      const { user } = await deps.db.writeAll((tx) => ({
        created: createdUserRows(tx, { name, email, department, phone: input.phone ?? null, passwordHash }, { actor, details: { email } }, now),
        user: userByEmail(tx, email),
      }));
      deps.metrics.usersCreated.inc();
      return userOf(user);
    } catch (error) {
      throw duplicateEmail(error, email);
    }
  });
}

/** Version check for PUT/PATCH: the body's `version` or an If-Match header, whichever is given. */
export function expectedVersion(bodyVersion: number | undefined, ifMatch: string | null | undefined): number | undefined {
  if (bodyVersion !== undefined) return bodyVersion;
  if (!ifMatch || ifMatch.trim() === "*") return undefined;
  const parsed = Number(ifMatch.replace(/^W\//, "").replaceAll('"', "").trim());
  return Number.isInteger(parsed) ? parsed : -1;
}

/** Who changes a user: their e-mail (the audit's actor), and whether they came by API key. */
export type Actor = Pick<Caller, "email" | "apiKey">;

/** Changes that conflict with the user while the unit runs are tried again, reading the user at the primary, this many times at most. */
const CHANGE_TRIES = 5;

/**
 * An e-mail change ends every token issued so far (the address may pass to another account,
 * and a token must not follow it), tells the old address and is audited EMAIL_CHANGED (by
 * `actor`, with both addresses, as USER_CREATED and USER_DELETED keep theirs); a password set by
 * an ADMIN ends them too. Whether the caller may make the change (their password, their role) is the route's,
 * but for the one thing only the unit knows: whether the address moves, which no API key may make it do.
 *
 * One list unit (one round trip to a remote primary, where an interactive transaction paid one per
 * statement): the user is read first, on an embedded replica from its copy (a refusal read again at
 * the primary: the copy may lag), and every statement of the unit writes only while the user is
 * still as read; if they are not, the unit wrote nothing and the change is judged again on the
 * primary's answer. USER_UPDATED follows in a unit of its own (test/outbox.test.ts: it never undoes the update).
 */
async function applyUpdate(
  deps: UsersDeps & PasswordPolicyDeps,
  id: number,
  changes: { name?: string; email?: string; department?: string | null; password?: string },
  expected: number | undefined,
  operation: string,
  actor: Actor,
): Promise<User> {
  return timed(deps.metrics, operation, async () => {
    const email = changes.email === undefined ? undefined : normalizeEmail(changes.email);
    // Judged against the address the account will have (read only when the policy looks at it).
    if (changes.password !== undefined) await assertPasswordAllowed(deps, changes.password, async () => email ?? (await findUser(deps.db, id).then(existing(id))).email);
    // Hashed before the unit, which awaits nothing but the database.
    const passwordHash = changes.password === undefined ? undefined : await hashPassword(changes.password);
    const read = async (source: Reader) => {
      const current = await versionAndEmail(source, id);
      // The address the user moves to, if the change moves it.
      const to = current && email !== undefined && email !== current.email ? email : undefined;
      return { current, to, taken: to !== undefined && (await emailTaken(source, to)) };
    };
    /** Why the change is refused as the user was read, if it is. */
    const refusal = ({ current, to, taken }: Awaited<ReturnType<typeof read>>) => {
      if (!current) return new AppError("USER_NOT_FOUND", { id });
      if (expected !== undefined && expected !== current.version) return new AppError("OPTIMISTIC_LOCK_CONFLICT");
      if (taken && to) return new AppError("DUPLICATE_EMAIL", { email: to });
      if (to && actor.apiKey) return new AppError("API_KEY_NOT_ALLOWED");
    };
    let user: User | undefined;
    try {
      for (let tries = 1; !user; tries++) {
        const seen = await readForAttempt(deps.db, tries, read, (answer) => refusal(answer) !== undefined);
        const refused = refusal(seen);
        if (refused) throw refused;
        const { current, to } = seen as { current: UserAt; to?: string };
        const at = new Date(deps.now());
        const side: ChangeSideRows = {
          revokeAccountTokens: to !== undefined,
          mails: [
            ...(to ? [{ kind: "EMAIL_CHANGED" as const, recipient: current.email }] : []),
            ...(passwordHash === undefined ? [] : [{ kind: "PASSWORD_CHANGED" as const, recipient: to ?? current.email }]),
          ],
          audit: to ? { action: "EMAIL_CHANGED", actor: actor.email, details: { oldEmail: current.email, newEmail: to } } : undefined,
        };
        const set: UserChanges = {
          name: changes.name?.trim(),
          email: to,
          passwordHash,
          department: changes.department,
          endBearerTokens: to !== undefined || passwordHash !== undefined,
        };
        // Only a unit that moves the address can fail midway (the unique index on e-mail).
        const answers = await deps.db.writeAll((tx) => ({ ...changeStillAt(tx, current, set, side, at), user: userById(tx, id) }), { failsMidway: to !== undefined });
        if (answers.updated.length > 0) user = userOf(answers.user);
        // Else the user changed between the read and the unit: nothing was written.
        else if (tries === CHANGE_TRIES) throw new AppError("OPTIMISTIC_LOCK_CONFLICT");
      }
    } catch (error) {
      throw email ? duplicateEmail(error, email) : error;
    }
    const { email: recipient } = user;
    // The update notification is not part of the update: failing to queue it never undoes it.
    try {
      await deps.db.writeAll((tx) => [enqueuedNotification(tx, "USER_UPDATED", recipient, { userId: id }, new Date(deps.now()))]);
    } catch (error) {
      deps.logger.warn({ err: error, userId: id }, "user-updated notification not queued");
    }
    return user;
  });
}

/** PUT: replaces name, email and department (absent department clears it); sets a given password. */
export function replaceUser(deps: UsersDeps & PasswordPolicyDeps, id: number, input: UserBody, ifMatch: string | null, actor: Actor) {
  const changes = { name: input.name, email: input.email, department: input.department ?? null, password: input.password };
  return applyUpdate(deps, id, changes, expectedVersion(input.version, ifMatch), "update", actor);
}

/** PATCH: changes only the supplied fields among name, email, department and password. */
export function patchUser(deps: UsersDeps & PasswordPolicyDeps, id: number, input: UserPatch, ifMatch: string | null, actor: Actor) {
  const changes = { name: input.name, email: input.email, department: input.department, password: input.password };
  return applyUpdate(deps, id, changes, expectedVersion(input.version, ifMatch), "patch", actor);
}

/** Deletes the user (audited USER_DELETED with the e-mail it had, in the same unit). */
export async function deleteUser(deps: UsersDeps, id: number, actor: string) {
  await timed(deps.metrics, "delete", () =>
    deps.db.write(async (tx) => {
      if (await isLastAdmin(tx, id)) throw new AppError("LAST_ADMIN");
      const email = await deleteUserRow(tx, id);
      if (email === undefined) throw new AppError("USER_NOT_FOUND", { id });
      await writeAudit(tx, { action: "USER_DELETED", actor, subjectType: "User", subjectId: id, details: { email } }, new Date(deps.now()));
    }),
  );
}

/**
 * Activates or deactivates a user (version +1, audited). Deactivating also revokes every bearer
 * token issued so far and never leaves the service without an active ADMIN (409 LAST_ADMIN).
 * Asking for the state the user is already in changes nothing.
 */
export async function setActive(deps: UsersDeps, id: number, active: boolean, actor: string): Promise<User> {
  const now = new Date(deps.now());
  await timed(deps.metrics, active ? "activate" : "deactivate", () =>
    deps.db.write(async (tx) => {
      if (!active && (await isLastAdmin(tx, id))) throw new AppError("LAST_ADMIN");
      if (!(await setActiveFlag(tx, id, active, now))) {
        existing(id)(await findUser(tx, id)); // already so: nothing to do; or 404 USER_NOT_FOUND
        return;
      }
      await writeAudit(tx, { action: active ? "USER_ACTIVATED" : "USER_DEACTIVATED", actor, subjectType: "User", subjectId: id }, now);
    }),
  );
  return findUser(deps.db, id).then(existing(id));
}

/** The user with the id, or 404 USER_NOT_FOUND. */
export const getUser = (db: Reader, id: number) => findUser(db, id).then(existing(id));

/** Every bearer token issued to the user so far stops working (the guard checks the token version). */
export async function revokeBearerTokens(deps: UsersDeps, id: number, actor: string) {
  const now = new Date(deps.now());
  await deps.db.write(async (tx) => {
    const revoked = await tokenVersionBump(tx, id);
    if (revoked.length === 0) throw new AppError("USER_NOT_FOUND", { id });
    await writeAudit(tx, { action: "USER_TOKENS_REVOKED", actor, subjectType: "User", subjectId: id }, now);
  });
}

/**
 * The user may sign in with a password again from everywhere at once: every failed-login count of
 * their e-mail (per network and across networks) and its lockout, with the lockouts' doubling, are
 * gone. Audited USER_UNLOCKED. The per-address counts stay: they belong to the addresses, not the user.
 */
export async function unlockSignIn(deps: UsersDeps, id: number, actor: string) {
  const [[user]] = await deps.db.readAll((db) => [emailOfUser(db, id)]);
  if (!user) throw new AppError("USER_NOT_FOUND", { id });
  const now = new Date(deps.now());
  await deps.db.writeAll((tx) => [...unlockStatements(tx, user.email), auditStatement(tx, { action: "USER_UNLOCKED", actor, subjectType: "User", subjectId: id }, now)]);
}
