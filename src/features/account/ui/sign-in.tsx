/**
 * Signing in on the account pages (/account/security, /account/authorize): e-mail and password,
 * then the second step when the answer says mfaRequired (a code from the app, a recovery code, or
 * the account's passkey); or a passkey alone; or another provider (OIDC_PROVIDERS), whose answer
 * comes back to this page's address with #code=… for the verifier this tab kept.
 */
import { startAuthentication } from "@simplewebauthn/browser";
import { useEffect, useState } from "preact/hooks";
import { splitOptions, type MfaChallenge, type TokenAnswer } from "./api";
import { Field, inputValue, type Outcome, OutcomeText, useAction, usePage } from "./parts";

type Answer = TokenAnswer | MfaChallenge;

/** The verifier of the provider sign-in this tab began (its S256 challenge went to /start). */
const VERIFIER_KEY = "usersvc.account.oidcVerifier";
const base64url = (bytes: ArrayBuffer | Uint8Array) =>
  btoa(String.fromCharCode(...new Uint8Array(bytes)))
    .replace(/\+/g, "-")
    .replace(/\//g, "_")
    .replace(/=+$/, "");

/** The providers' buttons: each starts the flow back to this very page (its query too, so an app's authorization survives it). */
function ProviderButtons({ busy }: { busy: boolean }) {
  const { api, t, basePath } = usePage();
  const [providers, setProviders] = useState<{ name: string; label: string }[]>([]);
  useEffect(() => {
    api.get<{ name: string; label: string }[]>("/api/auth/oidc/providers").then(setProviders, () => undefined);
  }, []);
  const start = async (name: string) => {
    const verifier = base64url(crypto.getRandomValues(new Uint8Array(32)));
    const challenge = base64url(await crypto.subtle.digest("SHA-256", new TextEncoder().encode(verifier)));
    sessionStorage.setItem(VERIFIER_KEY, verifier);
    const query = new URLSearchParams({ returnTo: location.pathname + location.search, codeChallenge: challenge });
    location.assign(`${basePath}/api/auth/oidc/${encodeURIComponent(name)}/start?${query}`);
  };
  if (providers.length === 0) return null;
  return (
    <ul class="providers">
      {providers.map((provider) => (
        <li key={provider.name}>
          <button type="button" onClick={() => start(provider.name)} disabled={busy}>
            {t("signIn.withProvider", { label: provider.label })}
          </button>
        </li>
      ))}
    </ul>
  );
}

export function SignIn({ notice, heading, intro, onSignedIn }: { notice?: Outcome; heading?: string; intro?: string; onSignedIn(answer: TokenAnswer): void }) {
  const { api, t } = usePage();
  const [email, setEmail] = useState("");
  const [password, setPassword] = useState("");
  const [challenge, setChallenge] = useState<MfaChallenge | undefined>();
  const [code, setCode] = useState("");
  const action = useAction();

  const finish = (answer: Answer | undefined) => {
    if (!answer) return;
    if ("mfaRequired" in answer) {
      setChallenge(answer);
      return;
    }
    onSignedIn(answer);
  };

  // Back from a provider: the fragment's code (or error), redeemed once with this tab's verifier.
  useEffect(() => {
    const fragment = new URLSearchParams(location.hash.slice(1));
    const code = fragment.get("code");
    const failed = fragment.get("error");
    if (!code && !failed) return;
    history.replaceState(null, "", location.pathname + location.search);
    const codeVerifier = sessionStorage.getItem(VERIFIER_KEY);
    sessionStorage.removeItem(VERIFIER_KEY);
    if (failed || !codeVerifier) {
      action.fail(t("signIn.providerFailed", { code: failed ?? "INVALID_OIDC_CODE" }));
      return;
    }
    action.run(() => api.post<{ data: Answer }>("/api/auth/oidc/exchange", { code, codeVerifier })).then((answer) => finish(answer?.data));
  }, []);

  const signIn = async (event: Event) => {
    event.preventDefault();
    finish((await action.run(() => api.post<{ data: Answer }>("/api/auth/login", { email, password })))?.data);
  };

  const passkeyAlone = async () => {
    const answer = await action.run(async () => {
      const { options, rest } = splitOptions<Parameters<typeof startAuthentication>[0]["optionsJSON"]>((await api.post<{ data: unknown }>("/api/auth/passkey/options")).data);
      const response = await startAuthentication({ optionsJSON: options });
      return api.post<{ data: Answer }>("/api/auth/passkey", { ...rest, response });
    });
    finish(answer?.data);
  };

  const verifyCode = async (event: Event) => {
    event.preventDefault();
    finish((await action.run(() => api.post<{ data: Answer }>("/api/auth/login/mfa", { mfaToken: challenge!.mfaToken, code: code.trim() })))?.data);
  };

  const verifyPasskey = async () => {
    const answer = await action.run(async () => {
      const { options } = splitOptions<Parameters<typeof startAuthentication>[0]["optionsJSON"]>(challenge!.passkeyOptions);
      const passkey = await startAuthentication({ optionsJSON: options });
      return api.post<{ data: Answer }>("/api/auth/login/mfa", { mfaToken: challenge!.mfaToken, passkey });
    });
    finish(answer?.data);
  };

  const startAgain = () => {
    setChallenge(undefined);
    setCode("");
    action.clear();
  };

  if (challenge) {
    return (
      <main>
        <h1>{t("signIn.secondStep")}</h1>
        <form onSubmit={verifyCode} noValidate>
          <p id="code-intro">{t("signIn.codeIntro")}</p>
          <Field label={t("signIn.code")}>
            {(id) => (
              <input
                id={id}
                name="code"
                autocomplete="one-time-code"
                inputMode="text"
                required
                maxLength={32}
                aria-describedby="code-intro"
                value={code}
                onInput={(e) => setCode(inputValue(e))}
              />
            )}
          </Field>
          <button type="submit" class="primary" disabled={action.busy}>
            {t("signIn.verify")}
          </button>
        </form>
        {challenge.passkeyOptions !== undefined && (
          <p>
            <button type="button" onClick={verifyPasskey} disabled={action.busy}>
              {t("signIn.usePasskey")}
            </button>
          </p>
        )}
        <OutcomeText outcome={action.outcome} />
        <p>
          <button type="button" class="link" onClick={startAgain}>
            {t("signIn.back")}
          </button>
        </p>
      </main>
    );
  }

  return (
    <main>
      <h1>{heading ?? t("signIn.title")}</h1>
      <OutcomeText outcome={notice} />
      <p>{intro ?? t("signIn.intro")}</p>
      <form onSubmit={signIn} noValidate>
        <Field label={t("signIn.email")}>
          {(id) => <input id={id} name="email" type="email" autocomplete="username webauthn" required value={email} onInput={(e) => setEmail(inputValue(e))} />}
        </Field>
        <Field label={t("signIn.password")}>
          {(id) => <input id={id} name="password" type="password" autocomplete="current-password" required value={password} onInput={(e) => setPassword(inputValue(e))} />}
        </Field>
        <button type="submit" class="primary" disabled={action.busy}>
          {action.busy ? t("common.busy") : t("signIn.submit")}
        </button>
      </form>
      <p class="or">{t("signIn.or")}</p>
      <button type="button" onClick={passkeyAlone} disabled={action.busy}>
        {t("signIn.passkey")}
      </button>
      <ProviderButtons busy={action.busy} />
      <OutcomeText outcome={action.outcome} />
    </main>
  );
}
