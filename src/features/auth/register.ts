/**
 * Registration: the user, the USER role, the profile (birth date, address), skills, age and
 * salary, the welcome and verification mails and the audit record, all in one transaction. The
 * unique index on users.email decides races between two registrations of one address.
 */
import { eq } from "drizzle-orm";
import type { Database, Reader } from "../../db/client";
import type { Statement } from "../../db/database";
import { userProfiles, userSkills, users } from "../../db/schema";
import { AppError, integrityKind } from "../../errors";
import type { Metrics } from "../../metrics";
import { timed } from "../../metrics";
import type { User } from "../users/model";
import { emailTaken, idOfEmail, newUserRows, normalizeEmail, selectUsers, toUser } from "../users/service";
import type { Lang } from "../../i18n";
import { verificationRows } from "../account/service";
import type { Address, RegistrationBody } from "./model";
import { hashPassword } from "./passwords";

export interface RegisterDeps {
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

/** `language` (from Accept-Language) picks the language of the user's e-mails. */
export async function register(deps: RegisterDeps, input: RegistrationBody, language: Lang = "en"): Promise<User> {
  return timed(deps.metrics, "register", async () => {
    const email = normalizeEmail(input.email);
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
      const results = await deps.db.writeAll(
        (tx) =>
          [
            tx.insert(users).values({
              name,
              email,
              phone: input.phone ?? null,
              age: input.age,
              salaryCents: salaryCents(input.salary),
              passwordHash,
              language,
              active: true,
              createdAt: now,
              updatedAt: now,
            }),
            ...newUserRows(tx, email, name, { actor: email, details: { email, via: "registration" } }, now),
            tx.insert(userProfiles).values({ userId: idOfEmail(email), birthDate: input.birthDate ?? null, address: addressLine(input.address) }),
            ...(skills.length > 0 ? [tx.insert(userSkills).values(skills.map((skill) => ({ userId: idOfEmail(email), ...skill })))] : []),
            ...verificationRows(tx, idOfEmail(email), email, now.getTime()),
            selectUsers(tx, eq(users.email, email)),
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
