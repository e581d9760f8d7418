/**
 * /account/authorize: where the OpenID Provider's authorization request (this page's query) sends
 * the browser. The provider says what is next (POST /oauth2/interaction, with its cookie): back to
 * the app with a code, a sign-in (any method, then POST /oauth2/session opens the provider's
 * browser session), or the consent screen (the app's name, the scopes in words; Allow or Deny).
 */
import { useEffect, useState } from "preact/hooks";
import { ApiError, session, type TokenAnswer } from "./api";
import { scopeWords } from "./i18n";
import { failureOf, type Outcome, OutcomeText, useAction, usePage } from "./parts";
import type { AccountFlowReturn } from "./providers";
import { SignIn } from "./sign-in";

interface Interaction {
  redirectTo?: string;
  step?: "login" | "consent";
  client?: { name: string };
  scopes?: string[];
}

type Step =
  | { kind: "loading" }
  | { kind: "leaving" }
  | { kind: "login"; client: string }
  | { kind: "consent"; client: string; scopes: string[] }
  | { kind: "failed"; outcome: Outcome };

export function Authorize({ query, back }: { query: string; back?: AccountFlowReturn }) {
  const { api, t } = usePage();
  const [step, setStep] = useState<Step>({ kind: "loading" });
  // Signed in on this page: prompt=login and max_age are satisfied by this sign-in.
  const [fresh, setFresh] = useState(false);
  const action = useAction();

  async function advance(choice: { consent?: boolean; deny?: boolean } = {}, signedInHere = fresh) {
    try {
      const answer = await api.post<Interaction>("/oauth2/interaction", { query, ...(signedInHere && { fresh: true }), ...choice });
      if (answer.redirectTo) {
        setStep({ kind: "leaving" });
        location.assign(answer.redirectTo);
      } else if (answer.step === "consent") setStep({ kind: "consent", client: answer.client!.name, scopes: answer.scopes! });
      else setStep({ kind: "login", client: answer.client!.name });
    } catch (error) {
      setStep({ kind: "failed", outcome: failureOf(error instanceof ApiError ? error : new ApiError(0, String(error)), t) });
    }
  }

  useEffect(() => {
    advance();
  }, []);

  const onSignedIn = async (answer: TokenAnswer) => {
    session.set({ token: answer.token, email: answer.user.email });
    const opened = await action.run(async () => {
      await api.post("/oauth2/session");
      return true;
    });
    if (!opened) return;
    setFresh(true);
    await advance({}, true);
  };

  const choose = (choice: { consent?: boolean; deny?: boolean }) => action.run(() => advance(choice));

  if (step.kind === "loading" || step.kind === "leaving") {
    return (
      <main>
        <p class="muted" role="status">
          {t(step.kind === "leaving" ? "authorize.leaving" : "common.busy")}
        </p>
      </main>
    );
  }
  if (step.kind === "failed") {
    return (
      <main>
        <h1>{t("authorize.failed")}</h1>
        <OutcomeText outcome={step.outcome} />
      </main>
    );
  }
  if (step.kind === "login") {
    return (
      <>
        <SignIn heading={t("authorize.signIn")} intro={t("authorize.signInIntro", { client: step.client })} back={back} onSignedIn={onSignedIn} />
        <OutcomeText outcome={action.outcome} />
      </>
    );
  }
  return (
    <main class="consent">
      <h1>{t("consent.title", { client: step.client })}</h1>
      <p id="consent-intro">{t("consent.intro", { client: step.client })}</p>
      <ul aria-describedby="consent-intro">
        {step.scopes.map((scope) => (
          <li key={scope}>{scopeWords(t, scope)}</li>
        ))}
      </ul>
      <p class="muted">{t("consent.withdraw")}</p>
      <p class="buttons">
        <button type="button" class="primary" onClick={() => choose({ consent: true })} disabled={action.busy}>
          {t("consent.allow")}
        </button>{" "}
        <button type="button" onClick={() => choose({ deny: true })} disabled={action.busy}>
          {t("consent.deny")}
        </button>
      </p>
      <OutcomeText outcome={action.outcome} />
    </main>
  );
}
