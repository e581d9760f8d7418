/**
 * Registration: the user, the USER role, the profile (birth date, address), skills, age and
 * salary, the welcome and verification mails and the audit record, all in one transaction. The
 * unique index on users.email decides races between two registrations of one address.
 */
import { sql } from "drizzle-orm";
import type { Database, Db, Reader } from "../../db/client";
import { prepared } from "../../db/prepared";
import { userProfiles, userSkills, users } from "../../db/schema";
import { AppError, integrityKind } from "../../errors";
import type { Metrics } from "../../metrics";
import { timed } from "../../metrics";
import { enqueueNotification, writeAudit } from "../notifications/outbox";
import type { User } from "../users/model";
import { emailTaken, findUser, grantRoles, normalizeEmail } from "../users/service";
import type { Lang } from "../../i18n";
import { enqueueVerification } from "../account/service";
import type { Address, RegistrationBody } from "./model";
import { hashPassword } from "./passwords";

export interface RegisterDeps {
  db: Database;
  metrics: Metrics;
  now: () => number;
}

/** The profile keeps the address as one line: "zipCode city district detail", without a missing zip. */
export const addressLine = (address: Address) =>
  [address.zipCode, address.city, address.district, address.detail].map((part) => part?.trim()).filter(Boolean).join(" ");

/** Skills by case-insensitive name, first spelling kept. */
export function distinctSkills(names: string[]) {
  const byKey = new Map<string, string>();
  for (const raw of names) {
    const name = raw.trim();
    const key = name.toLowerCase();
    if (!byKey.has(key)) byKey.set(key, name);
  }
  return [...byKey].map(([nameKey, name]) => ({ name, nameKey }));
}

export const salaryCents = (salary: number | undefined) => (salary === undefined ? null : Math.round(salary * 100));

const placeholders = <K extends string>(...names: K[]) => Object.fromEntries(names.map((name) => [name, sql.placeholder(name)])) as unknown as Record<K, ReturnType<typeof sql.placeholder>>;

const insertRegistered = prepared((tx: Db) =>
  tx
    .insert(users)
    .values({ ...placeholders("name", "email", "phone", "age", "salaryCents", "passwordHash", "language"), active: true, createdAt: sql.placeholder("now"), updatedAt: sql.placeholder("now") })
    .returning({ id: users.id })
    .prepare(),
);
const insertProfile = prepared((tx: Db) => tx.insert(userProfiles).values(placeholders("userId", "birthDate", "address")).prepare());
const insertSkill = prepared((tx: Db) => tx.insert(userSkills).values(placeholders("userId", "name", "nameKey")).prepare());

/** `language` (from Accept-Language) picks the language of the user's e-mails. */
export async function register(deps: RegisterDeps, input: RegistrationBody, language: Lang = "en"): Promise<User> {
  return timed(deps.metrics, "register", async () => {
    const email = normalizeEmail(input.email);
    if (await emailTaken(deps.db, email)) throw new AppError("DUPLICATE_EMAIL", { email });
    // Hash before the transaction: the write lock is never held through ~tens of ms of argon2.
    const passwordHash = await hashPassword(input.password);
    const now = new Date(deps.now());
    const name = input.name.trim();
    let id: number;
    try {
      id = await deps.db.write(async (tx) => {
        const [{ id }] = await insertRegistered(tx).all({ name, email, phone: input.phone ?? null, age: input.age, salaryCents: salaryCents(input.salary), passwordHash, language, now });
        await grantRoles(tx, id, ["USER"]);
        await insertProfile(tx).run({ userId: id, birthDate: input.birthDate ?? null, address: addressLine(input.address) });
        for (const skill of distinctSkills(input.skills)) await insertSkill(tx).run({ userId: id, ...skill });
        await enqueueNotification(tx, "WELCOME", email, { userId: id, name }, now);
        await enqueueVerification(tx, id, email, now.getTime());
        await writeAudit(tx, { action: "USER_CREATED", actor: email, subjectType: "User", subjectId: id, details: { email, via: "registration" } }, now);
        return id;
      });
    } catch (error) {
      throw integrityKind(error) === "duplicate" ? new AppError("DUPLICATE_EMAIL", { email }) : error;
    }
    deps.metrics.usersCreated.inc();
    return findUser(deps.db, id);
  });
}

/** True when no account uses the address. */
export async function emailAvailable(db: Reader, email: string) {
  return !(await emailTaken(db, email));
}
