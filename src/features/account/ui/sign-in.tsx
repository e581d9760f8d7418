/**
 * Signing in on the account pages (/account, /account/security, /account/authorize): e-mail and
 * password, then the second step when the answer says mfaRequired (a code from the app, a recovery
 * code, or the account's passkey); a passkey alone; or another provider (providers.tsx), whose
 * answer (`back`, taken off the address by main.tsx) is exchanged here with the verifier this tab
 * kept, or said as a sentence when it is an error.
 */
import { startAuthentication } from "@simplewebauthn/browser";
import { useEffect, useState } from "preact/hooks";
import { splitOptions, type MfaChallenge, type TokenAnswer } from "./api";
import { Field, inputValue, type Outcome, OutcomeText, useAction, usePage } from "./parts";
import { type AccountFlowReturn, flowErrorText, ProviderButtons } from "./providers";

type Answer = TokenAnswer | MfaChallenge;

export function SignIn({
  notice,
  heading,
  intro,
  back,
  onSignedIn,
}: {
  notice?: Outcome;
  heading?: string;
  intro?: string;
  back?: AccountFlowReturn;
  onSignedIn(answer: TokenAnswer): void;
}) {
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

  // Back from a provider: its code with the verifier this tab kept, or its error as a sentence.
  useEffect(() => {
    if (!back) return;
    if (back.error !== undefined) return action.fail(flowErrorText(t, back.error));
    if (back.kind !== "sign-in") return action.fail(flowErrorText(t, "INVALID_OIDC_CODE"));
    void action.run(() => api.post<{ data: Answer }>("/api/auth/oidc/exchange", { code: back.code, codeVerifier: back.verifier })).then((answer) => finish(answer?.data));
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
