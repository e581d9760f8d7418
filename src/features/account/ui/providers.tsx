/**
 * Other providers on the account pages: the sign-in buttons, the security page's linked sign-ins
 * (listed, linked after a step-up, unlinked) and the step-up itself ("Confirm it is you": the
 * password or an app code, a passkey, or a new sign-in at a linked provider), whose token the next
 * change takes instead of the password. A flow's verifier and purpose wait in sessionStorage
 * while the browser is at the provider (http/browser/provider-flow.ts).
 */
import { startAuthentication } from "@simplewebauthn/browser";
import { type ComponentChildren, createContext } from "preact";
import { useContext, useEffect, useMemo, useState } from "preact/hooks";
import { beginFlow, type FlowReturn, knownFlowError, type LinkedIdentity, type ProviderButton, signInStartUrl } from "../../../http/browser/provider-flow";
import { splitOptions } from "./api";
import { dateTime, type MessageKey, type Translate } from "./i18n";
import { Field, inputValue, OutcomeText, useAction, usePage } from "./parts";

export const FLOW_KEY = "usersvc.account.flow";
export type FlowKind = "sign-in" | "link" | "step-up";
export type AccountFlowReturn = FlowReturn<FlowKind>;

/** Where every provider sends the browser back: the security page, which finishes the flow. */
const returnPath = (basePath: string) => `${basePath}/account/security`;

/** A flow error's sentence, in the page's language (never the bare code). */
export const flowErrorText = (t: Translate, code: string) => t(`providers.error.${knownFlowError(code) ?? "other"}` as MessageKey);

/** The configured providers (none: an empty list, and no buttons). */
export function useProviders(): ProviderButton[] {
  const { api } = usePage();
  const [providers, setProviders] = useState<ProviderButton[]>([]);
  useEffect(() => {
    api.get<ProviderButton[]>("/api/auth/oidc/providers").then(setProviders, () => setProviders([]));
  }, []);
  return providers;
}

/**
 * "Sign in with …" for each provider: a browser navigation to the provider, by way of our start,
 * back to this very page (its query too, so an app's authorization at /account/authorize survives it).
 */
export function ProviderButtons({ busy }: { busy: boolean }) {
  const { t, basePath } = usePage();
  const providers = useProviders();
  if (providers.length === 0) return null;
  const go = async (provider: string) => {
    const challenge = await beginFlow<FlowKind>(FLOW_KEY, { kind: "sign-in", provider });
    location.assign(signInStartUrl(basePath, provider, location.pathname + location.search, challenge));
  };
  return (
    <ul class="providers">
      {providers.map((p) => (
        <li key={p.name}>
          <button type="button" onClick={() => go(p.name)} disabled={busy}>
            {t("providers.signInWith", { label: p.label })}
          </button>
        </li>
      ))}
    </ul>
  );
}

/* ---- The step-up ---- */

const HELD_KEY = "usersvc.account.stepUp";

interface StepUpValue {
  /** Whether a step-up token is held (unexpired). */
  held: boolean;
  /** The held token, used up by the change that takes it. */
  take(): string | undefined;
  /** Asks the user to confirm (the panel opens); `next` runs with the token once there is one. */
  ask(next?: string): void;
}
const StepUpContext = createContext<StepUpValue>({ held: false, take: () => undefined, ask: () => undefined });
export const useStepUp = () => useContext(StepUpContext);

const heldToken = (): string | undefined => {
  const raw = sessionStorage.getItem(HELD_KEY);
  const held = raw ? (JSON.parse(raw) as { token: string; expiresAt: number }) : undefined;
  return held && held.expiresAt > Date.now() ? held.token : undefined;
};
const hold = (answer: { stepUpToken: string; expiresIn: number }) =>
  sessionStorage.setItem(HELD_KEY, JSON.stringify({ token: answer.stepUpToken, expiresAt: Date.now() + answer.expiresIn * 1000 - 5_000 }));

/**
 * The security page's step-up and linked sign-ins, around the page's sections: `back` is a link's
 * or a step-up's answer from the provider, finished here (the link completed; the step-up's token
 * held, and what it was asked for continued).
 */
export function ProviderSections({ email, back, children }: { email: string; back?: AccountFlowReturn; children: ComponentChildren }) {
  const { api, t, basePath } = usePage();
  const [asking, setAsking] = useState<{ next?: string } | undefined>();
  const [held, setHeld] = useState(() => heldToken() !== undefined);
  const [changed, setChanged] = useState(0);
  const outcome = useAction();

  /** Begins linking `provider` with the step-up token: off to the provider. */
  const link = async (provider: string, stepUpToken: string) => {
    const codeChallenge = await beginFlow<FlowKind>(FLOW_KEY, { kind: "link", provider });
    const started = await outcome.run(() =>
      api.post<{ url: string }>(`/api/account/identities/${encodeURIComponent(provider)}/start`, { returnTo: returnPath(basePath), codeChallenge, stepUpToken }),
    );
    if (started) location.assign(started.url);
  };
  const take = () => {
    const token = heldToken();
    sessionStorage.removeItem(HELD_KEY);
    setHeld(false);
    return token;
  };
  /** With a token in hand: what it was asked for, or held for the next change. */
  const proved = (answer: { stepUpToken: string; expiresIn: number }, next?: string) => {
    setAsking(undefined);
    if (next?.startsWith("link:")) return void link(next.slice(5), answer.stepUpToken);
    hold(answer);
    setHeld(true);
  };
  const value = useMemo<StepUpValue>(
    () => ({
      held,
      take,
      ask: (next) => {
        const token = next?.startsWith("link:") ? take() : undefined;
        if (token) void link(next!.slice(5), token);
        else setAsking({ next });
      },
    }),
    [held],
  );

  // A provider's answer for this page: a link to complete, or a step-up to turn into a token.
  useEffect(() => {
    if (!back) return;
    if (back.error !== undefined) return outcome.fail(flowErrorText(t, back.error));
    const body = { code: back.code, codeVerifier: back.verifier };
    if (back.kind === "link") {
      void outcome
        .run(() => api.post<LinkedIdentity>("/api/account/identities/link", body))
        .then((linked) => {
          if (linked) outcome.succeed(t("identities.linked", { label: linked.label }));
          setChanged((n) => n + 1);
        });
    } else if (back.kind === "step-up") {
      void outcome.run(() => api.post<{ stepUpToken: string; expiresIn: number }>("/api/account/step-up/exchange", body)).then((answer) => answer && proved(answer, back.next));
    }
  }, []);

  return (
    <StepUpContext.Provider value={value}>
      <OutcomeText outcome={outcome.outcome} />
      {held && (
        <p class="notice" role="status">
          {t("stepUp.held")}
        </p>
      )}
      {asking && <StepUpPanel next={asking.next} onProved={proved} onCancel={() => setAsking(undefined)} />}
      {children}
      <Identities email={email} changed={changed} />
    </StepUpContext.Provider>
  );
}

/** "Confirm it is you": the password or an app code, a passkey, or a linked provider that can confirm a fresh sign-in. */
function StepUpPanel({ next, onProved, onCancel }: { next?: string; onProved(answer: { stepUpToken: string; expiresIn: number }, next?: string): void; onCancel(): void }) {
  const { api, t, basePath } = usePage();
  const [secret, setSecret] = useState("");
  const action = useAction();
  const providers = useProviders();
  const [linked, setLinked] = useState<string[]>([]);
  useEffect(() => {
    api.get<LinkedIdentity[]>("/api/account/identities").then(
      (rows) => setLinked(rows.map((row) => row.provider)),
      () => undefined,
    );
    document.getElementById("step-up-title")?.focus();
  }, []);
  type StepUp = { stepUpToken: string; expiresIn: number };
  const done = (answer: StepUp | undefined) => answer && onProved(answer, next);
  const confirm = async (event: Event) => {
    event.preventDefault();
    const given = secret.trim();
    done(await action.run(() => api.post<StepUp>("/api/account/step-up", /^\d{6}$/.test(given) ? { code: given } : { password: secret })));
  };
  const passkey = async () =>
    done(
      await action.run(async () => {
        const { options } = splitOptions<Parameters<typeof startAuthentication>[0]["optionsJSON"]>(await api.post<unknown>("/api/account/step-up/passkey-options"));
        return api.post<StepUp>("/api/account/step-up", { passkey: await startAuthentication({ optionsJSON: options }) });
      }),
    );
  const atProvider = async (provider: string) => {
    const codeChallenge = await beginFlow<FlowKind>(FLOW_KEY, { kind: "step-up", provider, next });
    const started = await action.run(() =>
      api.post<{ url: string }>(`/api/account/step-up/${encodeURIComponent(provider)}/start`, { returnTo: returnPath(basePath), codeChallenge }),
    );
    if (started) location.assign(started.url);
  };
  const reauthenticating = providers.filter((p) => p.stepUp && linked.includes(p.name));
  return (
    <section id="step-up" aria-labelledby="step-up-title">
      <h2 id="step-up-title" tabIndex={-1}>
        {t("stepUp.title")}
      </h2>
      <p id="step-up-intro">{t("stepUp.intro")}</p>
      <form onSubmit={confirm} noValidate>
        <Field label={t("stepUp.secret")}>
          {(id) => (
            <input
              id={id}
              name="step-up-secret"
              type="password"
              autocomplete="current-password"
              aria-describedby="step-up-intro"
              value={secret}
              onInput={(e) => setSecret(inputValue(e))}
            />
          )}
        </Field>
        <button type="submit" class="primary" disabled={action.busy}>
          {t("stepUp.confirm")}
        </button>{" "}
        <button type="button" onClick={passkey} disabled={action.busy}>
          {t("stepUp.passkey")}
        </button>
        {reauthenticating.map((p) => (
          <span key={p.name}>
            {" "}
            <button type="button" onClick={() => atProvider(p.name)} disabled={action.busy}>
              {t("stepUp.provider", { label: p.label })}
            </button>
          </span>
        ))}{" "}
        <button type="button" class="link" onClick={onCancel}>
          {t("common.cancel")}
        </button>
      </form>
      <OutcomeText outcome={action.outcome} />
    </section>
  );
}

/** The caller's linked sign-ins: each unlinked in its row; another provider linked after a step-up; a password set by mail. */
function Identities({ email, changed }: { email: string; changed: number }) {
  const { api, t, lang } = usePage();
  const stepUp = useStepUp();
  const providers = useProviders();
  const [rows, setRows] = useState<LinkedIdentity[] | undefined>();
  const [round, setRound] = useState(0);
  const action = useAction();
  useEffect(() => {
    api.get<LinkedIdentity[]>("/api/account/identities").then(setRows, () => setRows([]));
  }, [round, changed]);
  const unlink = async (row: LinkedIdentity) => {
    await action.run(() => api.delete(`/api/account/identities/${row.id}`), "identities.unlinked");
    setRound((n) => n + 1);
  };
  const setPassword = () => action.run(() => api.post("/api/auth/password-reset/request", { email }), "identities.setPasswordSent");
  const unlinked = providers.filter((p) => !rows?.some((row) => row.provider === p.name));
  if (providers.length === 0 && rows?.length === 0) return null;
  return (
    <section id="identities" aria-labelledby="identities-title">
      <h2 id="identities-title" tabIndex={-1}>
        {t("identities.title")}
      </h2>
      {rows === undefined ? (
        <p class="muted">{t("common.busy")}</p>
      ) : rows.length === 0 ? (
        <p>{t("identities.none")}</p>
      ) : (
        <table>
          <thead>
            <tr>
              <th scope="col">{t("identities.provider")}</th>
              <th scope="col">{t("identities.email")}</th>
              <th scope="col">{t("identities.linkedAt")}</th>
              <th scope="col">{t("identities.lastUsed")}</th>
              <th scope="col">{t("identities.actions")}</th>
            </tr>
          </thead>
          <tbody>
            {rows.map((row) => (
              <tr key={row.id}>
                <td>{row.label}</td>
                <td>{row.email ?? ""}</td>
                <td>{dateTime(lang, row.linkedAt, t("common.never"))}</td>
                <td>{dateTime(lang, row.lastUsedAt, t("common.never"))}</td>
                <td>
                  <button type="button" aria-label={t("identities.unlinkOf", { label: row.label })} onClick={() => unlink(row)} disabled={action.busy}>
                    {t("identities.unlink")}
                  </button>
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
      {unlinked.map((p) => (
        <span key={p.name}>
          <button type="button" onClick={() => stepUp.ask(`link:${p.name}`)} disabled={action.busy}>
            {t("identities.link", { label: p.label })}
          </button>{" "}
        </span>
      ))}
      <p class="muted">{t("identities.setPasswordIntro")}</p>
      <button type="button" onClick={setPassword} disabled={action.busy}>
        {t("identities.setPassword")}
      </button>
      <OutcomeText outcome={action.outcome} />
    </section>
  );
}
