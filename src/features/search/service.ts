/** The user search's rules, usable without HTTP: what each query means, and the caller's own profile. */
import type { Reader } from "../../db/database";
import { listAnswer } from "../../http/list-answer";
import { existing, type User } from "../../models/user";
import { type Page, pageOf } from "../../paging";
import { parseInstant, queryBoolean, queryInteger } from "../../validation";
import { searchUsers, userChunks, type UserSearchCriteria } from "../../store/user-search";
import { findUser } from "../../store/users";
import type { UserSearchQuery } from "./model";

/** GET /api/search/users: every given criterion restricts; active defaults to true; page 0 and size 10 unless asked. */
export function searchByQuery(db: Reader, query: UserSearchQuery) {
  const { page, size, age, active, createdAfter, createdBefore, ...rest } = query;
  const criteria: UserSearchCriteria = {
    ...rest,
    age: queryInteger(age),
    active: queryBoolean(active) ?? true,
    createdAfter: createdAfter ? parseInstant(createdAfter, "createdAfter") : undefined,
    createdBefore: createdBefore ? parseInstant(createdBefore, "createdBefore") : undefined,
  };
  return searchUsers(db, criteria, pageOf({ page: queryInteger(page), size: queryInteger(size) }, 10));
}

/** One page, or every match: read and sent in chunks, so memory stays flat however many match. */
export const matches = async (db: Reader, criteria: UserSearchCriteria, page: Page | undefined) =>
  (page ? searchUsers(db, criteria, page) : listAnswer(userChunks(db, criteria))) as Promise<User[]>;

/** The caller's own User (404 USER_NOT_FOUND were it deleted meanwhile). */
export const profileOf = (db: Reader, id: number) => findUser(db, id).then(existing(id));
