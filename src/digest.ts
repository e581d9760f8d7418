/**
 * How a secret the service hands out is kept: only its SHA-256, in base64url (43 characters).
 * Refresh tokens, setup links, mfaTokens' and challenges' records, recovery codes and API key
 * secrets are all stored this way, so a copy of the database opens nothing.
 */
export const sha256Base64url = (text: string) => Bun.SHA256.hash(text, "base64url");
