/**
 * Registration: the user, the USER role, the profile (birth date, address), skills, age and
 * salary, the welcome and verification mails and the audit record, all in one transaction. The
 * unique index on users.email decides races between two registrations of one address.
 */
import { sql } from "drizzle-orm";
import type { Database, Db, Reader } from "../../db/client";
import { bound, prepared } from "../../db/prepared";
import type { Statement } from "../../db/database";
import { userProfiles, userSkills, users } from "../../db/schema";
import { AppError, integrityKind } from "../../errors";
import type { Metrics } from "../../metrics";
import { timed } from "../../metrics";
import type { User } from "../users/model";
import { emailTaken, idOfEmail, newUserRows, normalizeEmail, toUser, userByEmail } from "../users/service";
import type { Lang } from "../../i18n";
import { verificationRows } from "../account/service";
import type { Address, RegistrationBody } from "./model";
import { assertPasswordAllowed, type PasswordPolicyDeps } from "./password-policy";
import { hashPassword } from "./passwords";

export interface RegisterDeps extends PasswordPolicyDeps {
  db: Database;
  metrics: Metrics;
  now: () => number;
}

/** The profile keeps the address as one line: "zipCode city district detail", without a missing zip. */
export const addressLine = (address: Address) =>
  [address.zipCode, address.city, address.district, address.detail]
    .map((part) => part?.trim())
    .filter(Boolean)
    .join(" ");

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

/** The statements of a registration's list unit, prepared once per handle; the new user is found by its e-mail. */
const insertRegistered = prepared((tx: Db) =>
  tx
    .insert(users)
    .values({
      name: sql.placeholder("name"),
      email: sql.placeholder("email"),
      phone: sql.placeholder("phone"),
      age: sql.placeholder("age"),
      salaryCents: sql.placeholder("salaryCents"),
      passwordHash: sql.placeholder("passwordHash"),
      language: sql.placeholder("language"),
      active: true,
      createdAt: sql.placeholder("now"),
      updatedAt: sql.placeholder("now"),
    })
    .prepare(),
);
const insertProfile = prepared((tx: Db) =>
  tx
    .insert(userProfiles)
    .values({ userId: idOfEmail(sql.placeholder("email")), birthDate: sql.placeholder("birthDate"), address: sql.placeholder("address") })
    .prepare(),
);
/** One skill a statement: one prepared statement serves any number of them. */
const insertSkill = prepared((tx: Db) =>
  tx
    .insert(userSkills)
    .values({ userId: idOfEmail(sql.placeholder("email")), name: sql.placeholder("name"), nameKey: sql.placeholder("nameKey") })
    .prepare(),
);

/** `language` (from Accept-Language) picks the language of the user's e-mails. */
export async function register(deps: RegisterDeps, input: RegistrationBody, language: Lang = "en"): Promise<User> {
  return timed(deps.metrics, "register", async () => {
    const email = normalizeEmail(input.email);
    await assertPasswordAllowed(deps, input.password, email);
    if (await emailTaken(deps.db, email)) throw new AppError("DUPLICATE_EMAIL", { email });
    // Hash before the transaction: the write lock is never held through ~tens of ms of argon2.
    const passwordHash = await hashPassword(input.password);
    const now = new Date(deps.now());
    const name = input.name.trim();
    const skills = distinctSkills(input.skills);
    try {
      // One list unit, as POST /api/users: the account, its role, profile, skills, welcome,
      // verification token and mail, audit row, and the answer read back. The unique index on
      // e-mail settles a race.
      // Every statement is prepared: no SQL is built per registration.
      const results = await deps.db.writeAll(
        (tx) =>
          [
            bound(insertRegistered(tx), {
              name,
              email,
              phone: input.phone ?? null,
              age: input.age ?? null,
              salaryCents: salaryCents(input.salary),
              passwordHash,
              language,
              now,
            }),
            ...newUserRows(tx, email, name, { actor: email, details: { email, via: "registration" } }, now),
            bound(insertProfile(tx), { email, birthDate: input.birthDate ?? null, address: addressLine(input.address) }),
            ...skills.map((skill) => bound(insertSkill(tx), { email, ...skill })),
            ...verificationRows(tx, "new", email, now.getTime()),
            bound(userByEmail(tx), { email }),
          ] as unknown as [Statement, ...Statement[]],
      );
      deps.metrics.usersCreated.inc();
      const [row] = results[results.length - 1] as Parameters<typeof toUser>[0][];
      return toUser(row);
    } catch (error) {
      throw integrityKind(error) === "duplicate" ? new AppError("DUPLICATE_EMAIL", { email }) : error;
    }
  });
}

/** True when no account uses the address. */
export async function emailAvailable(db: Reader, email: string) {
  return !(await emailTaken(db, email));
}
