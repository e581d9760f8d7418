/** Every table the schema declares, by its SQL name: suites that compare rows derive their lists from it, so a new table is covered without editing a hand list. */
import { getTableName } from "drizzle-orm";
import * as schema from "../../src/db/schema";

export const SCHEMA_TABLES: readonly string[] = Object.values(schema).map((table) => getTableName(table));
