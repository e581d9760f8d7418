/**
 * Sign-in: e-mail and password against /api/auth/login, or another provider (a button each, the
 * flow's verifier kept in this tab: http/browser/provider-flow.ts; `back` is its answer, exchanged
 * here, or its error said as a sentence); then, for an account with a second factor, its code (an
 * authenticator app's or a recovery code) against /api/auth/login/mfa; only an ADMIN's token is kept.
 */
import { useEffect, useState } from "preact/hooks";
import { beginFlow, type FlowReturn, knownFlowError, type ProviderButton, signInStartUrl } from "../../../../http/browser/provider-flow";
import type { Session, User } from "../api";
import { useConsole } from "../app-context";
import { ErrorText, Field, ScreenTitle, useAction, inputValue } from "../components";
import type { MessageKey } from "../i18n";

/** Where the console keeps a provider flow's verifier while the browser is at the provider. */
export const FLOW_KEY = "usersvc.console.flow";

type Answer = { data: { token: string; user: User } | { mfaRequired: true; mfaToken: string } };

export function SignIn({ expired, back, basePath, onSignedIn }: { expired: boolean; back?: FlowReturn; basePath: string; onSignedIn(session: Session): void }) {
  const { api, t } = useConsole();
  const [email, setEmail] = useState("");
  const [password, setPassword] = useState("");
  const [notAdmin, setNotAdmin] = useState(false);
  /** The second step's token, once the password was right for an account with a second factor. */
  const [mfaToken, setMfaToken] = useState<string>();
  const [code, setCode] = useState("");
  const action = useAction();
  // First run: with no ADMIN yet, say where the setup link is (the open GET /api/account/setup tells only that).
  const [firstRun, setFirstRun] = useState(false);
  const [providers, setProviders] = useState<ProviderButton[]>([]);
  /** A provider's error, as a sentence of ours. */
  const [flowError, setFlowError] = useState<string>();
  useEffect(() => {
    api.get<{ setupRequired: boolean }>("/api/account/setup").then(
      (status) => setFirstRun(status.setupRequired),
      () => undefined,
    );
    api.get<ProviderButton[]>("/api/auth/oidc/providers").then(setProviders, () => undefined);
    if (back?.error !== undefined) setFlowError(t(`signIn.error.${knownFlowError(back.error) ?? "other"}` as MessageKey));
    else if (back) void action.run(() => api.post<Answer>("/api/auth/oidc/exchange", { code: back.code, codeVerifier: back.verifier })).then(finish);
  }, []);

  const withProvider = async (provider: string) => {
    const challenge = await beginFlow(FLOW_KEY, { kind: "sign-in", provider });
    location.assign(signInStartUrl(basePath, provider, `${basePath}/admin`, challenge));
  };

  const submit = async (event: Event) => {
    event.preventDefault();
    setNotAdmin(false);
    setFlowError(undefined);
    finish(
      await action.run(() => (mfaToken ? api.post<Answer>("/api/auth/login/mfa", { mfaToken, code: code.trim() }) : api.post<Answer>("/api/auth/login", { email, password }))),
    );
  };

  function finish(answer: Answer | undefined) {
    if (!answer) return;
    if ("mfaRequired" in answer.data) return setMfaToken(answer.data.mfaToken);
    // The token is never stored for anyone else: the console is an ADMIN's tool.
    if (!answer.data.user.roles.includes("ADMIN")) return setNotAdmin(true);
    onSignedIn({ token: answer.data.token, email: answer.data.user.email });
  }

  return (
    <main class="sign-in" id="main">
      <form onSubmit={submit} aria-describedby={expired ? "expired" : undefined}>
        <ScreenTitle>{t("signIn.title")}</ScreenTitle>
        {firstRun && (
          <p class="notice" id="first-run" role="status">
            {t("signIn.firstRun")}
          </p>
        )}
        {expired && (
          <p class="notice" id="expired" role="status">
            {t("signIn.expired")}
          </p>
        )}
        {/* A provider's second step has no e-mail typed here: only the code is asked for. */}
        {!(mfaToken && email === "") && (
          <Field label={t("signIn.email")}>
            {(id) => <input id={id} name="email" type="email" autocomplete="username" required value={email} onInput={(e) => setEmail(inputValue(e))} />}
          </Field>
        )}
        {mfaToken ? (
          <Field label={t("signIn.code")} hint={t("signIn.codeHint")}>
            {(id, describedBy) => (
              <input id={id} name="code" autocomplete="one-time-code" aria-describedby={describedBy} required value={code} onInput={(e) => setCode(inputValue(e))} />
            )}
          </Field>
        ) : (
          <Field label={t("signIn.password")}>
            {(id) => <input id={id} name="password" type="password" autocomplete="current-password" required value={password} onInput={(e) => setPassword(inputValue(e))} />}
          </Field>
        )}
        {notAdmin && (
          <p class="form-error" role="alert">
            {t("signIn.notAdmin")}
          </p>
        )}
        {flowError && (
          <p class="form-error" role="alert">
            {flowError}
          </p>
        )}
        <ErrorText error={action.error} />
        <button type="submit" class="primary" disabled={action.busy}>
          {action.busy ? t("signIn.busy") : t("signIn.submit")}
        </button>
        {providers.length > 0 && !mfaToken && (
          <>
            <p>{t("signIn.or")}</p>
            {providers.map((p) => (
              <p key={p.name}>
                <button type="button" onClick={() => withProvider(p.name)} disabled={action.busy}>
                  {t("signIn.with", { label: p.label })}
                </button>
              </p>
            ))}
          </>
        )}
      </form>
    </main>
  );
}
