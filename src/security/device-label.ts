/**
 * A readable device label for a session ("Chrome 142 on Linux") from its user agent, by bowser
 * (MIT), loaded on the first sign-in rather than at start: an idle process never holds it.
 */
const MAX_USER_AGENT_LENGTH = 512;

let parser: Promise<typeof import("bowser")> | undefined;

/** The stored user agent (cut to a sane length), and its label; both null without one. */
export async function deviceOf(request: Request): Promise<{ userAgent: string | null; device: string | null }> {
  const userAgent = request.headers.get("user-agent")?.slice(0, MAX_USER_AGENT_LENGTH) || null;
  if (!userAgent) return { userAgent, device: null };
  parser ??= import("bowser");
  const { browser, os } = (await parser).default.parse(userAgent);
  const name = browser.name ? [browser.name, browser.version?.split(".")[0]].filter(Boolean).join(" ") : undefined;
  const device = [name, os.name && `on ${os.name}`].filter(Boolean).join(" ");
  return { userAgent, device: device || null };
}
