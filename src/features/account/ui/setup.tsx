/**
 * /account/setup: the first ADMIN, from the one-time link the server printed. The server serves
 * it only for a live token (else a page saying why not: features/account/page). On success the new
 * ADMIN is signed in (the session goes to sessionStorage for the security page) and offered a
 * passkey or an authenticator app at once.
 */
import { useState } from "preact/hooks";
import { session, type TokenAnswer } from "./api";
import { Field, inputValue, OutcomeText, useAction, usePage } from "./parts";

export function Setup({ strict }: { strict: boolean }) {
  const { api, t, basePath } = usePage();
  const token = new URLSearchParams(location.search).get("token");
  const [name, setName] = useState("");
  const [email, setEmail] = useState("");
  const [password, setPassword] = useState("");
  const [confirm, setConfirm] = useState("");
  const [created, setCreated] = useState<string | undefined>();
  const action = useAction();

  const submit = async (event: Event) => {
    event.preventDefault();
    if (password !== confirm) return action.fail(t("setup.mismatch"));
    const answer = await action.run(() => api.post<{ data: TokenAnswer }>("/api/account/setup", { token, name, email, password }));
    if (!answer) return;
    session.set({ token: answer.data.token, email: answer.data.user.email });
    setCreated(answer.data.user.email);
  };

  return (
    <main>
      <h1>{t("setup.title")}</h1>
      {created ? (
        <div class="outcome success" role="status">
          <p>{t("setup.done", { email: created })}</p>
          <p>{t("setup.protect")}</p>
          <ul class="next">
            <li>
              <a href={`${basePath}/account/security#passkeys`}>{t("setup.passkey")}</a>
            </li>
            <li>
              <a href={`${basePath}/account/security#totp`}>{t("setup.totp")}</a>
            </li>
            <li>
              <a href={`${basePath}/admin`}>{t("setup.console")}</a>
            </li>
          </ul>
        </div>
      ) : (
        <form onSubmit={submit} noValidate>
          <p>{t("setup.intro")}</p>
          <Field label={t("setup.name")}>
            {(id) => <input id={id} name="name" autocomplete="name" required maxLength={50} value={name} onInput={(e) => setName(inputValue(e))} />}
          </Field>
          <Field label={t("setup.email")}>
            {(id) => <input id={id} name="email" type="email" autocomplete="username" required maxLength={320} value={email} onInput={(e) => setEmail(inputValue(e))} />}
          </Field>
          <Field label={t("setup.password")} hint={t(strict ? "setup.passwordHintStrict" : "setup.passwordHint")}>
            {(id, hint) => (
              <input
                id={id}
                name="password"
                type="password"
                autocomplete="new-password"
                required
                aria-describedby={hint}
                value={password}
                onInput={(e) => setPassword(inputValue(e))}
              />
            )}
          </Field>
          <Field label={t("setup.confirm")}>
            {(id) => <input id={id} name="confirm" type="password" autocomplete="new-password" required value={confirm} onInput={(e) => setConfirm(inputValue(e))} />}
          </Field>
          <button type="submit" class="primary" disabled={action.busy}>
            {action.busy ? t("common.busy") : t("setup.submit")}
          </button>
          <OutcomeText outcome={action.outcome} />
        </form>
      )}
    </main>
  );
}
