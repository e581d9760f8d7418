/**
 * Registration: the user, the USER role, the profile (birth date, address), skills, age and
 * salary, the welcome and verification mails and the audit record, all in one transaction. The
 * unique index on users.email decides races between two registrations of one address.
 */
import type { Database, Reader } from "../../db/database";
import { AppError, integrityKind } from "../../errors";
import type { Lang } from "../../i18n";
import type { Metrics } from "../../metrics";
import { timed } from "../../metrics";
import type { User } from "../../models/user";
import { assertPasswordAllowed, type PasswordPolicyDeps } from "../../security/password-policy";
import { hashPassword } from "../../security/passwords";
import { verificationRows } from "../../store/account-tokens";
import { emailTaken, normalizeEmail, registeredUserRows, userByEmail, userOf } from "../../store/users";
import type { Address, RegistrationBody } from "./model";

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

/** `language` (from Accept-Language) picks the language of the user's e-mails. */
export async function register(deps: RegisterDeps, input: RegistrationBody, language: Lang = "en"): Promise<User> {
  return timed(deps.metrics, "register", async () => {
    const email = normalizeEmail(input.email);
    await assertPasswordAllowed(deps, input.password, email);
    if (await emailTaken(deps.db, email, { spares: true })) throw new AppError("DUPLICATE_EMAIL", { email });
    // Hash before the transaction: the write lock is never held through ~tens of ms of argon2.
    const passwordHash = await hashPassword(input.password);
    const now = new Date(deps.now());
    const name = input.name.trim();
    try {
      // One list unit, as POST /api/users: the account, its role, profile, skills, welcome,
      // verification token and mail, audit row, and the user read back. The unique index on
      // e-mail settles a race.
      const { user } = await deps.db.writeAll((tx) => ({
        registered: registeredUserRows(
          tx,
          {
            name,
            email,
            phone: input.phone ?? null,
            age: input.age ?? null,
            salaryCents: salaryCents(input.salary),
            passwordHash,
            language,
            birthDate: input.birthDate ?? null,
            address: addressLine(input.address),
            skills: distinctSkills(input.skills),
          },
          now,
        ),
        verification: verificationRows(tx, "new", email, now.getTime()),
        user: userByEmail(tx, email),
      }));
      deps.metrics.usersCreated.inc();
      return userOf(user);
    } catch (error) {
      throw integrityKind(error) === "duplicate" ? new AppError("DUPLICATE_EMAIL", { email }) : error;
    }
  });
}

/** True when no account uses the address. */
export async function emailAvailable(db: Reader, email: string) {
  return !(await emailTaken(db, email));
}
