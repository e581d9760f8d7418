/** Sign-in: e-mail and password against /api/auth/login; only an ADMIN's token is kept. */
import { useEffect, useState } from "preact/hooks";
import type { Session, User } from "../api";
import { useConsole } from "../app-context";
import { ErrorText, Field, ScreenTitle, useAction, inputValue } from "../components";

export function SignIn({ expired, onSignedIn }: { expired: boolean; onSignedIn(session: Session): void }) {
  const { api, t } = useConsole();
  const [email, setEmail] = useState("");
  const [password, setPassword] = useState("");
  const [notAdmin, setNotAdmin] = useState(false);
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
    const answer = await action.run(() => api.post<{ data: { token: string; user: User } }>("/api/auth/login", { email, password }));
    if (!answer) return;
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
        <Field label={t("signIn.password")}>
          {(id) => <input id={id} name="password" type="password" autocomplete="current-password" required value={password} onInput={(e) => setPassword(inputValue(e))} />}
        </Field>
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
