/**
 * Bun macro: runs when the code is bundled (or transpiled by `bun run` / `bun test`) and inlines
 * the common-password list into the program, so nothing is read or downloaded at run time.
 *
 * The list is the password dictionary of @zxcvbn-ts/language-common (MIT): the passwords that
 * appear more than 10 times in Mark Burnett's ten million passwords (xato.net), lower-cased, most
 * common first, less those that zxcvbn's own pattern matchers would guess sooner than their rank
 * (49,233 entries, all printable ASCII). Here it is sorted, joined by newlines and gzip-compressed:
 * 388 KB of text become a ~150 KB string literal (base64).
 */
import passwords from "@zxcvbn-ts/language-common/src/passwords.json";

export function packedCommonPasswords(): string {
  const sorted = [...new Set(passwords.map((p) => p.toLowerCase()))].sort();
  return Buffer.from(Bun.gzipSync(new TextEncoder().encode(sorted.join("\n")), { level: 9 })).toString("base64");
}
