/** The products feature's error codes and texts (English, and zh-TW). */
import { defineErrors, defineTexts } from "../../i18n";

const productsErrors = defineErrors({
  PRODUCT_NOT_FOUND: { status: 404, en: (p) => `Product not found, ID: ${p.id}`, "zh-TW": (p) => `找不到商品，ID: ${p.id}` },
  /** Codes are unique; a taken one is named, unlike the generic DATA_INTEGRITY_VIOLATION. */
  DUPLICATE_PRODUCT_CODE: { status: 409, en: (p) => `Product code already exists: ${p.code}`, "zh-TW": (p) => `商品代碼已存在: ${p.code}` },
});

const productsTexts = defineTexts({
  "field.price.digits": { en: "must have at most 8 integer and 2 fraction digits", "zh-TW": "價格格式不正確，最多 8 位整數與 2 位小數" },
});

/** This feature's part of the catalogue (src/catalogue.ts lists it once). */
export const productsCatalogue = { errors: productsErrors, texts: productsTexts };
