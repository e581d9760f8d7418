/** The search feature's texts (English, and zh-TW). */
import { defineTexts } from "../../i18n";

const searchTexts = defineTexts({
  "field.searchText": { en: "must not contain a NUL character", "zh-TW": "不可包含 NUL 字元" },
});

/** This feature's part of the catalogue (src/catalogue.ts lists it once). */
export const searchCatalogue = { texts: searchTexts };
