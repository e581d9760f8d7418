/**
 * A readable device label for a session ("Chrome 142 on Linux") from its user agent, by bowser
 * (MIT), loaded on the first sign-in rather than at start: an idle process never holds it.
 * Labels are kept per user agent (a few hundred): clients send the same one sign-in after sign-in,
 * and a second step would otherwise parse its first step's again.
 */
const MAX_USER_AGENT_LENGTH = 512;
const KEPT_LABELS = 256;

let parser: Promise<typeof import("bowser")> | undefined;
const labels = new Map<string, string | null>();

/** The stored user agent (cut to a sane length), and its label; both null without one. */
export async function deviceOf(request: Request): Promise<{ userAgent: string | null; device: string | null }> {
  const userAgent = request.headers.get("user-agent")?.slice(0, MAX_USER_AGENT_LENGTH) || null;
  if (!userAgent) return { userAgent, device: null };
  let device = labels.get(userAgent);
  if (device === undefined) {
    parser ??= import("bowser");
    device = labelOf((await parser).default.parse(userAgent));
    // The oldest label makes room (a Map keeps insertion order).
    if (labels.size >= KEPT_LABELS) labels.delete(labels.keys().next().value as string);
    labels.set(userAgent, device);
  }
  return { userAgent, device };
}

function labelOf({ browser, os }: { browser: { name?: string; version?: string }; os: { name?: string } }) {
  const name = browser.name ? [browser.name, browser.version?.split(".")[0]].filter(Boolean).join(" ") : undefined;
  return [name, os.name && `on ${os.name}`].filter(Boolean).join(" ") || null;
}
