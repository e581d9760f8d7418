/** What both pages are made of: the page context, labelled fields, an action's outcome, a status region. */
import { createContext } from "preact";
import { useContext, useState } from "preact/hooks";
import { ApiError, type Api } from "./api";
import type { Lang, MessageKey, Translate } from "./i18n";

export interface Page {
  api: Api;
  t: Translate;
  lang: Lang;
  basePath: string;
  /** The server is an OpenID Provider (OAUTH_SERVER=on): the security page lists the apps with access. */
  provider: boolean;
}

export const PageContext = createContext<Page | undefined>(undefined);
export const usePage = () => useContext(PageContext)!;

export { Field } from "../../../http/browser/kit";

export const inputValue = (event: Event) => (event.currentTarget as HTMLInputElement).value;

export type Outcome = { kind: "success" | "error"; message: string; details?: string[] };

/** A browser's own failure (a passkey prompt closed: NotAllowedError) keeps its message, in our words where we have them. */
function asApiError(error: unknown, t: Translate): ApiError {
  if (error instanceof ApiError) return error;
  if (error instanceof Error && error.name === "NotAllowedError") return new ApiError(0, t("passkeys.cancelled"));
  return new ApiError(0, error instanceof Error ? error.message : String(error));
}

/**
 * Runs one action at a time: busy while it runs, then its outcome (a success text, or the API's
 * message with its reasons; a route this server lacks and a stale sign-in get a text of their own).
 */
export function useAction() {
  const { t } = usePage();
  const [busy, setBusy] = useState(false);
  const [outcome, setOutcome] = useState<Outcome | undefined>();
  async function run<T>(work: () => Promise<T>, done?: MessageKey): Promise<T | undefined> {
    setBusy(true);
    setOutcome(undefined);
    try {
      const result = await work();
      if (done) setOutcome({ kind: "success", message: t(done) });
      return result;
    } catch (error) {
      setOutcome(failureOf(asApiError(error, t), t));
      return undefined;
    } finally {
      setBusy(false);
    }
  }
  return {
    busy,
    outcome,
    run,
    clear: () => setOutcome(undefined),
    fail: (message: string) => setOutcome({ kind: "error", message }),
    succeed: (message: string) => setOutcome({ kind: "success", message }),
  };
}

export function failureOf(error: ApiError, t: Translate): Outcome {
  if (error.code === "NETWORK") return { kind: "error", message: t("common.failed") };
  if (error.code === "REAUTHENTICATION_REQUIRED") return { kind: "error", message: t("common.reauth") };
  if (error.status === 404 && error.code === "NOT_FOUND") return { kind: "error", message: t("common.unavailable") };
  return { kind: "error", message: error.message, details: error.errors };
}

/** An outcome in a live region: errors as alerts, successes politely. */
export function OutcomeText({ outcome }: { outcome?: Outcome }) {
  if (!outcome) return null;
  return (
    <div class={`outcome ${outcome.kind}`} role={outcome.kind === "error" ? "alert" : "status"}>
      <p>{outcome.message}</p>
      {outcome.details && outcome.details.length > 0 && (
        <ul>
          {outcome.details.map((line) => (
            <li key={line}>{line}</li>
          ))}
        </ul>
      )}
    </div>
  );
}

/** Recovery codes shown once: as a list, and as a .txt download (a blob: link, so no request leaves the page). */
export function RecoveryCodes({ codes, email, onDone }: { codes: string[]; email: string; onDone(): void }) {
  const { t } = usePage();
  const text = `${t("recovery.fileHeader", { email })}\n\n${codes.join("\n")}\n`;
  const href = `data:text/plain;charset=utf-8,${encodeURIComponent(text)}`;
  return (
    <section class="codes" aria-label={t("recovery.title")}>
      <p>{t("recovery.shown")}</p>
      <ul class="code-list">
        {codes.map((code) => (
          <li key={code}>
            <code>{code}</code>
          </li>
        ))}
      </ul>
      <a class="button" href={href} download="usersvc-recovery-codes.txt">
        {t("recovery.download")}
      </a>{" "}
      <button type="button" onClick={onDone}>
        {t("recovery.saved")}
      </button>
    </section>
  );
}
