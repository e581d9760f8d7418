import { defineConfig } from "drizzle-kit";

// Only the generator uses this file; the service applies drizzle/ itself (src/db/migrate.ts).
export default defineConfig({
  dialect: "turso",
  schema: "./src/db/schema.ts",
  out: "./drizzle",
});
