/** The departments / roles / profiles feature's error codes (English, and zh-TW). */
import { defineErrors } from "../../i18n";

const peopleErrors = defineErrors({
  DUPLICATE_DEPARTMENT: { status: 409, en: (p) => `Department already exists: ${p.name}`, "zh-TW": (p) => `部門已存在: ${p.name}` },
});

/** This feature's part of the catalogue (src/catalogue.ts lists it once). */
export const peopleCatalogue = { errors: peopleErrors };
