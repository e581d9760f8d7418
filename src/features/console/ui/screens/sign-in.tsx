/**
 * Sign-in: e-mail and password against /api/auth/login, then, for an account with a second
 * factor, its code (an authenticator app's or a recovery code) against /api/auth/login/mfa; only
 * an ADMIN's token is kept.
 */
import { useEffect, useState } from "preact/hooks";
import type { Session, User } from "../api";
import { useConsole } from "../app-context";
import { ErrorText, Field, ScreenTitle, useAction, inputValue } from "../components";

export function SignIn({ expired, onSignedIn }: { expired: boolean; onSignedIn(session: Session): void }) {
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
  useEffect(() => {
    api.get<{ setupRequired: boolean }>("/api/account/setup").then(
      (status) => setFirstRun(status.setupRequired),
      () => undefined,
    );
  }, []);

  const submit = async (event: Event) => {
    event.preventDefault();
    setNotAdmin(false);
    type Answer = { data: { token: string; user: User } | { mfaRequired: true; mfaToken: string } };
    const answer = await action.run(() =>
      mfaToken ? api.post<Answer>("/api/auth/login/mfa", { mfaToken, code: code.trim() }) : api.post<Answer>("/api/auth/login", { email, password }),
    );
    if (!answer) return;
    if ("mfaRequired" in answer.data) return setMfaToken(answer.data.mfaToken);
    // The token is never stored for anyone else: the console is an ADMIN's tool.
    if (!answer.data.user.roles.includes("ADMIN")) return setNotAdmin(true);
    onSignedIn({ token: answer.data.token, email: answer.data.user.email });
  };

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
        <Field label={t("signIn.email")}>
          {(id) => <input id={id} name="email" type="email" autocomplete="username" required value={email} onInput={(e) => setEmail(inputValue(e))} />}
        </Field>
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
        <ErrorText error={action.error} />
        <button type="submit" class="primary" disabled={action.busy}>
          {action.busy ? t("signIn.busy") : t("signIn.submit")}
        </button>
      </form>
    </main>
  );
}
