/**
 * The languages a client can read, and the shape of a text in both: English (default) and the
 * original service's Traditional Chinese, word for word (its clients show them as they are), chosen by
 * Accept-Language. The texts themselves live in each feature's errors.ts, merged in
 * src/catalogue.ts, so a key that is used exists in both languages.
 */
export type Lang = "en" | "zh-TW";

export type TextParams = Record<string, string | number>;
export type Text = string | ((p: TextParams) => string);
/** One text in both languages. */
export interface Texts {
  en: Text;
  "zh-TW": Text;
}
/** An errorCode: the status it answers and its envelope message in both languages. */
export interface ErrorEntry extends Texts {
  status: number;
}

/** A feature's error codes (UPPER_SNAKE): checked in shape, literal keys kept for the merged type. */
export const defineErrors = <const C extends Record<string, ErrorEntry>>(codes: C): C => codes;

/** A feature's other texts (field messages, success messages), keyed `<area>.<what>`. */
export const defineTexts = <const T extends Record<string, Texts>>(texts: T): T => texts;

export function render(entry: Texts, lang: Lang, params: TextParams = {}): string {
  const text = entry[lang];
  return typeof text === "function" ? text(params) : text;
}

/** zh, zh-TW, zh-Hant… pick the original service's texts; anything else English. Highest q wins. */
export function languageOf(acceptLanguage: string | null | undefined): Lang {
  if (!acceptLanguage) return "en";
  const ranked = acceptLanguage
    .split(",")
    .map((part) => {
      const [tag, ...params] = part.split(";");
      const q = params.map((p) => /^\s*q\s*=\s*([\d.]+)\s*$/.exec(p)?.[1]).find(Boolean);
      return { tag: tag.trim().toLowerCase(), q: q === undefined ? 1 : Number(q) };
    })
    .filter((entry) => entry.q > 0)
    .sort((a, b) => b.q - a.q); // stable: equal weights keep the client's order
  for (const { tag } of ranked) {
    if (tag.startsWith("zh")) return "zh-TW";
    if (tag.startsWith("en")) return "en";
  }
  return "en";
}
