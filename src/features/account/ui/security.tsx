/**
 * /account/security once signed in: the caller's sessions, authenticator app (TOTP) with its
 * recovery codes, passkeys, API keys, the apps with access (OpenID Provider) and linked sign-ins
 * (providers.tsx, with the step-up a change takes without a password), each a section with its own heading, live outcome and
 * keyboard-reachable controls. A section whose routes this server lacks says so and stays quiet.
 */
import { startRegistration } from "@simplewebauthn/browser";
import type { ComponentChildren } from "preact";
import { useCallback, useEffect, useState } from "preact/hooks";
import { ApiError, splitOptions } from "./api";
import { dateTime, type MessageKey, scopeWords } from "./i18n";
import { failureOf, Field, inputValue, OutcomeText, RecoveryCodes, useAction, usePage } from "./parts";
import { type AccountFlowReturn, ProviderSections, useStepUp } from "./providers";

type Load<T> = { state: "loading" } | { state: "error"; error: ApiError } | { state: "ready"; data: T };

/** GETs `path` now, on reload() and when `changed` moves (another section changed what it shows); a stale answer never overwrites a newer one. */
function useLoad<T>(path: string, changed = 0): Load<T> & { reload(): void } {
  const { api } = usePage();
  const [state, setState] = useState<Load<T>>({ state: "loading" });
  const [round, setRound] = useState(0);
  useEffect(() => {
    let current = true;
    api.get<T>(path).then(
      (data) => current && setState({ state: "ready", data }),
      (error) => current && setState({ state: "error", error: error instanceof ApiError ? error : new ApiError(0, String(error)) }),
    );
    return () => {
      current = false;
    };
  }, [path, round, changed]);
  return { ...state, reload: useCallback(() => setRound((n) => n + 1), []) };
}

function Section(props: { id: string; title: MessageKey; children: ComponentChildren }) {
  const { t } = usePage();
  return (
    <section id={props.id} aria-labelledby={`${props.id}-title`}>
      <h2 id={`${props.id}-title`} tabIndex={-1}>
        {t(props.title)}
      </h2>
      {props.children}
    </section>
  );
}

/** A load's loading and error states; `children` once it is ready. */
function Loaded<T>({ load, children }: { load: Load<T>; children: (data: T) => ComponentChildren }) {
  const { t } = usePage();
  if (load.state === "loading") return <p class="muted">{t("common.busy")}</p>;
  // A section whose routes this server lacks (404 NOT_FOUND) is a note, not an alarm.
  if (load.state === "error" && load.error.code === "NOT_FOUND") return <p class="muted">{t("common.unavailable")}</p>;
  if (load.state === "error") return <OutcomeText outcome={failureOf(load.error, t)} />;
  return <>{children(load.data)}</>;
}

interface SessionRow {
  id: string;
  device: string | null;
  address: string;
  amr: string[];
  lastSeenAt: string;
  current: boolean;
}

function Sessions() {
  const { api, t, lang } = usePage();
  const load = useLoad<SessionRow[]>("/api/account/sessions");
  const action = useAction();
  const end = async (id: string) => {
    await action.run(() => api.delete(`/api/account/sessions/${encodeURIComponent(id)}`), "sessions.ended");
    load.reload();
  };
  const endOthers = async () => {
    await action.run(() => api.post("/api/account/sessions/revoke-others"), "sessions.ended");
    load.reload();
  };
  return (
    <Section id="sessions" title="sessions.title">
      <Loaded load={load}>
        {(rows) => (
          <>
            <table>
              <thead>
                <tr>
                  <th scope="col">{t("sessions.device")}</th>
                  <th scope="col">{t("sessions.address")}</th>
                  <th scope="col">{t("sessions.method")}</th>
                  <th scope="col">{t("sessions.lastSeen")}</th>
                  <th scope="col">{t("sessions.actions")}</th>
                </tr>
              </thead>
              <tbody>
                {rows.map((row) => {
                  const device = row.device ?? t("sessions.unknownDevice");
                  return (
                    <tr key={row.id}>
                      <td>
                        {device}
                        {row.current && <span class="tag"> ({t("sessions.current")})</span>}
                      </td>
                      <td>{row.address}</td>
                      <td>{row.amr.map((m) => (`amr.${m}` in AMR ? t(`amr.${m}` as MessageKey) : m)).join(" + ")}</td>
                      <td>{dateTime(lang, row.lastSeenAt, t("common.never"))}</td>
                      <td>
                        {!row.current && (
                          <button type="button" aria-label={t("sessions.endLabel", { device })} onClick={() => end(row.id)} disabled={action.busy}>
                            {t("sessions.end")}
                          </button>
                        )}
                      </td>
                    </tr>
                  );
                })}
              </tbody>
            </table>
            {rows.some((row) => !row.current) && (
              <button type="button" onClick={endOthers} disabled={action.busy}>
                {t("sessions.endOthers")}
              </button>
            )}
          </>
        )}
      </Loaded>
      <OutcomeText outcome={action.outcome} />
    </Section>
  );
}

const AMR = { "amr.pwd": 1, "amr.otp": 1, "amr.hwk": 1, "amr.rec": 1, "amr.fed": 1 };

interface MfaStatus {
  totp: boolean;
  passkeys: number;
  recoveryCodesLeft: number;
}

/** Recovery codes as a route answers them: a bare array, or inside an object. */
const codesOf = (answer: unknown): string[] =>
  Array.isArray(answer) ? answer : ((answer as { recoveryCodes?: string[]; codes?: string[] }).recoveryCodes ?? (answer as { codes: string[] }).codes);

/** Called once a factor is removed: that ended every session of the user, the page's own too. */
type OnEnded = (done: MessageKey) => void;

/** What removing a factor proves: a held step-up token when nothing is typed, else six digits are a code of the authenticator app, anything else the password. */
const removalProof = (given: string, stepUp: { take(): string | undefined }) => {
  const held = given.trim() === "" ? stepUp.take() : undefined;
  if (held) return { stepUpToken: held };
  return /^\d{6}$/.test(given.trim()) ? { code: given.trim() } : { password: given };
};

/** "Confirm another way": the step-up, for an account without a password (or at hand). */
function AnotherWay() {
  const { t } = usePage();
  const stepUp = useStepUp();
  return (
    <button type="button" class="link" onClick={() => stepUp.ask()}>
      {t("stepUp.another")}
    </button>
  );
}

/**
 * MFA_REQUIRED_ROLES: an account's first second factor also takes a code sent out of band. Once
 * the server asks for it (ENROL_CODE_REQUIRED), the code is mailed and `field` asks for it; `body`
 * adds it to the enrolment's next try, `asking` wraps the enrolment's request to notice the refusal.
 */
function useEnrolCode() {
  const { api, t } = usePage();
  const [asked, setAsked] = useState(false);
  const [code, setCode] = useState("");
  const mail = useAction();
  const send = () => mail.run(() => api.post("/api/account/mfa/enrol-code"), "enrolCode.sent");
  const asking = async <T,>(work: () => Promise<T>) => {
    try {
      return await work();
    } catch (error) {
      if (error instanceof ApiError && error.code === "ENROL_CODE_REQUIRED" && !asked) {
        setAsked(true);
        void send();
      }
      throw error;
    }
  };
  const field = asked && (
    <div class="enrol-code">
      <p>{t("enrolCode.intro")}</p>
      <Field label={t("enrolCode.label")}>
        {(id) => <input id={id} name="enrol-code" autocomplete="one-time-code" inputMode="numeric" maxLength={6} value={code} onInput={(e) => setCode(inputValue(e))} />}
      </Field>
      <button type="button" onClick={send} disabled={mail.busy}>
        {t("enrolCode.resend")}
      </button>
      <OutcomeText outcome={mail.outcome} />
    </div>
  );
  return { body: () => (asked && code.trim() ? { enrolCode: code.trim() } : {}), asking, field };
}

function SecondFactors({ email, onEnded, changed }: { email: string; onEnded: OnEnded; changed: number }) {
  const { api, t } = usePage();
  const load = useLoad<MfaStatus>("/api/account/mfa", changed);
  const action = useAction();
  const [enrolment, setEnrolment] = useState<{ secret: string; qrSvg: string } | undefined>();
  const [code, setCode] = useState("");
  const [secret, setSecret] = useState("");
  const recovery = useAction();
  const [password, setPassword] = useState("");
  const [codes, setCodes] = useState<string[] | undefined>();
  const enrolCode = useEnrolCode();
  const stepUp = useStepUp();

  const start = async () => setEnrolment(await action.run(() => api.post<{ secret: string; qrSvg: string }>("/api/account/mfa/totp")));
  const confirm = async (event: Event) => {
    event.preventDefault();
    const answer = await action.run(() => enrolCode.asking(() => api.post<unknown>("/api/account/mfa/totp/confirm", { code: code.trim(), ...enrolCode.body() })), "totp.enabled");
    if (answer === undefined) return;
    setEnrolment(undefined);
    setCode("");
    setCodes(codesOf(answer));
    load.reload();
  };
  const remove = async (event: Event) => {
    event.preventDefault();
    const done = await action.run(() => api.delete("/api/account/mfa/totp", removalProof(secret, stepUp)).then(() => true));
    if (done) onEnded("totp.removed");
  };
  const regenerate = async (event: Event) => {
    event.preventDefault();
    const held = password === "" ? stepUp.take() : undefined;
    const answer = await recovery.run(() => api.post<unknown>("/api/account/mfa/recovery-codes", held ? { stepUpToken: held } : { password }));
    if (answer === undefined) return;
    setPassword("");
    setCodes(codesOf(answer));
    load.reload();
  };

  return (
    <>
      <Section id="totp" title="totp.title">
        <Loaded load={load}>
          {(status) =>
            enrolment ? (
              <form onSubmit={confirm} noValidate>
                <p id="totp-scan">{t("totp.scan")}</p>
                <img class="qr" src={`data:image/svg+xml;charset=utf-8,${encodeURIComponent(enrolment.qrSvg)}`} alt={t("totp.qr")} width={200} height={200} />
                <p>
                  {t("totp.secret")}: <code class="secret">{enrolment.secret}</code>
                </p>
                <Field label={t("totp.code")}>
                  {(id) => (
                    <input
                      id={id}
                      name="code"
                      autocomplete="one-time-code"
                      inputMode="numeric"
                      required
                      maxLength={6}
                      aria-describedby="totp-scan"
                      value={code}
                      onInput={(e) => setCode(inputValue(e))}
                    />
                  )}
                </Field>
                {enrolCode.field}
                <button type="submit" class="primary" disabled={action.busy}>
                  {t("totp.confirm")}
                </button>{" "}
                <button type="button" onClick={() => setEnrolment(undefined)}>
                  {t("common.cancel")}
                </button>
              </form>
            ) : status.totp ? (
              <form onSubmit={remove} noValidate>
                <p>{t("totp.on")}</p>
                <p id="totp-remove">{t("totp.removeIntro")}</p>
                <Field label={t("totp.removeCode")}>
                  {(id) => (
                    <input
                      id={id}
                      name="code-or-password"
                      type="password"
                      autocomplete="current-password"
                      required
                      aria-describedby="totp-remove"
                      value={secret}
                      onInput={(e) => setSecret(inputValue(e))}
                    />
                  )}
                </Field>
                <button type="submit" disabled={action.busy}>
                  {t("totp.remove")}
                </button>{" "}
                <AnotherWay />
              </form>
            ) : (
              <>
                <p>{t("totp.off")}</p>
                <button type="button" class="primary" onClick={start} disabled={action.busy}>
                  {t("totp.start")}
                </button>
              </>
            )
          }
        </Loaded>
        <OutcomeText outcome={action.outcome} />
        {codes && <RecoveryCodes codes={codes} email={email} onDone={() => setCodes(undefined)} />}
      </Section>
      <Section id="recovery" title="recovery.title">
        <Loaded load={load}>
          {(status) =>
            status.totp || status.passkeys > 0 ? (
              <form onSubmit={regenerate} noValidate>
                <p>{t("recovery.left", { count: status.recoveryCodesLeft })}</p>
                <p id="recovery-intro">{t("recovery.regenerateIntro")}</p>
                <Field label={t("common.password")}>
                  {(id) => (
                    <input
                      id={id}
                      name="password"
                      type="password"
                      autocomplete="current-password"
                      required
                      aria-describedby="recovery-intro"
                      value={password}
                      onInput={(e) => setPassword(inputValue(e))}
                    />
                  )}
                </Field>
                <button type="submit" disabled={recovery.busy}>
                  {t("recovery.regenerate")}
                </button>{" "}
                <AnotherWay />
              </form>
            ) : (
              <p>{t("recovery.none")}</p>
            )
          }
        </Loaded>
        <OutcomeText outcome={recovery.outcome} />
      </Section>
    </>
  );
}

interface PasskeyRow {
  id: string;
  name: string;
  createdAt: string;
  lastUsedAt: string | null;
}

/** A passkey's row: renamed in place; removed with the password or a current app code, asked for in place. */
function PasskeyItem({ row, busy, onRename, onRemove }: { row: PasskeyRow; busy: boolean; onRename(name: string): Promise<void>; onRemove(proof: string): void }) {
  const { t, lang } = usePage();
  const [editing, setEditing] = useState(false);
  const [removing, setRemoving] = useState(false);
  const [name, setName] = useState(row.name);
  const [proof, setProof] = useState("");
  const save = async (event: Event) => {
    event.preventDefault();
    await onRename(name);
    setEditing(false);
  };
  const remove = (event: Event) => {
    event.preventDefault();
    onRemove(proof);
  };
  return (
    <tr>
      <td>
        {editing ? (
          <form onSubmit={save} class="inline">
            <Field label={t("passkeys.renameLabel", { name: row.name })}>
              {(id) => <input id={id} name="name" required maxLength={100} value={name} onInput={(e) => setName(inputValue(e))} />}
            </Field>
            <button type="submit" disabled={busy}>
              {t("common.save")}
            </button>{" "}
            <button type="button" onClick={() => setEditing(false)}>
              {t("common.cancel")}
            </button>
          </form>
        ) : (
          row.name
        )}
      </td>
      <td>{dateTime(lang, row.createdAt, t("common.never"))}</td>
      <td>{dateTime(lang, row.lastUsedAt, t("common.never"))}</td>
      <td>
        {removing ? (
          <form onSubmit={remove} class="inline" noValidate>
            <Field label={t("passkeys.removeProof", { name: row.name })}>
              {(id) => <input id={id} name="code-or-password" type="password" autocomplete="current-password" required value={proof} onInput={(e) => setProof(inputValue(e))} />}
            </Field>
            <button type="submit" disabled={busy}>
              {t("common.remove")}
            </button>{" "}
            <button type="button" onClick={() => setRemoving(false)}>
              {t("common.cancel")}
            </button>{" "}
            <AnotherWay />
          </form>
        ) : (
          !editing && (
            <>
              <button type="button" aria-label={t("passkeys.renameOf", { name: row.name })} onClick={() => setEditing(true)}>
                {t("passkeys.rename")}
              </button>{" "}
              <button type="button" aria-label={t("passkeys.removeOf", { name: row.name })} onClick={() => setRemoving(true)} disabled={busy}>
                {t("common.remove")}
              </button>
            </>
          )
        )}
      </td>
    </tr>
  );
}

/** The account's first passkey brings its recovery codes (when it has none): shown here once, and the recovery section told. */
function Passkeys({ email, onEnded, onAdded }: { email: string; onEnded: OnEnded; onAdded(): void }) {
  const { api, t } = usePage();
  const load = useLoad<PasskeyRow[]>("/api/account/passkeys");
  const action = useAction();
  const [name, setName] = useState(t("passkeys.defaultName"));
  const [codes, setCodes] = useState<string[] | undefined>();
  const enrolCode = useEnrolCode();
  const add = async (event: Event) => {
    event.preventDefault();
    const added = await action.run(async () => {
      const { options, rest } = splitOptions<Parameters<typeof startRegistration>[0]["optionsJSON"]>(await api.post<unknown>("/api/account/passkeys/options"));
      const response = await startRegistration({ optionsJSON: options });
      return enrolCode.asking(() => api.post<{ recoveryCodes?: string[] }>("/api/account/passkeys", { ...rest, name, response, ...enrolCode.body() }));
    }, "passkeys.added");
    load.reload();
    if (!added) return;
    if (added.recoveryCodes) setCodes(added.recoveryCodes);
    onAdded();
  };
  const rename = async (id: string, newName: string) => {
    await action.run(() => api.patch(`/api/account/passkeys/${encodeURIComponent(id)}`, { name: newName }));
    load.reload();
  };
  const stepUp = useStepUp();
  const remove = async (id: string, proof: string) => {
    const done = await action.run(() => api.delete(`/api/account/passkeys/${encodeURIComponent(id)}`, removalProof(proof, stepUp)).then(() => true));
    if (done) onEnded("passkeys.removed");
  };
  return (
    <Section id="passkeys" title="passkeys.title">
      <Loaded load={load}>
        {(rows) => (
          <>
            {rows.length === 0 ? (
              <p>{t("passkeys.none")}</p>
            ) : (
              <table>
                <thead>
                  <tr>
                    <th scope="col">{t("passkeys.name")}</th>
                    <th scope="col">{t("passkeys.created")}</th>
                    <th scope="col">{t("passkeys.lastUsed")}</th>
                    <th scope="col">{t("passkeys.actions")}</th>
                  </tr>
                </thead>
                <tbody>
                  {rows.map((row) => (
                    <PasskeyItem key={row.id} row={row} busy={action.busy} onRename={(n) => rename(row.id, n)} onRemove={(proof) => remove(row.id, proof)} />
                  ))}
                </tbody>
              </table>
            )}
            <form onSubmit={add} noValidate>
              <Field label={t("passkeys.newName")}>
                {(id) => <input id={id} name="passkey-name" required maxLength={100} value={name} onInput={(e) => setName(inputValue(e))} />}
              </Field>
              {enrolCode.field}
              <button type="submit" class="primary" disabled={action.busy}>
                {t("passkeys.add")}
              </button>
            </form>
          </>
        )}
      </Loaded>
      <OutcomeText outcome={action.outcome} />
      {codes && <RecoveryCodes codes={codes} email={email} onDone={() => setCodes(undefined)} />}
    </Section>
  );
}

/** What a revocable list says: its heading, its empty note, its column heads (the last one over the buttons), each row's button and the outcome of a press. */
interface RevocableWords {
  title: MessageKey;
  none: MessageKey;
  columns: MessageKey[];
  button: MessageKey;
  buttonOf: MessageKey;
  done: MessageKey;
}

/** A section listing what the user may take back one row at a time (API keys, apps): a DELETE of `path`/{key} a row, then a reload. */
function RevocableList<T extends { name: string }>(props: { id: string; path: string; words: RevocableWords; keyOf(row: T): string; cells(row: T): ComponentChildren }) {
  const { api, t } = usePage();
  const { words } = props;
  const load = useLoad<T[]>(props.path);
  const action = useAction();
  const revoke = async (key: string) => {
    await action.run(() => api.delete(`${props.path}/${encodeURIComponent(key)}`), words.done);
    load.reload();
  };
  return (
    <Section id={props.id} title={words.title}>
      <Loaded load={load}>
        {(rows) =>
          rows.length === 0 ? (
            <p>{t(words.none)}</p>
          ) : (
            <table>
              <thead>
                <tr>
                  {words.columns.map((column) => (
                    <th key={column} scope="col">
                      {t(column)}
                    </th>
                  ))}
                </tr>
              </thead>
              <tbody>
                {rows.map((row) => (
                  <tr key={props.keyOf(row)}>
                    {props.cells(row)}
                    <td>
                      <button type="button" aria-label={t(words.buttonOf, { name: row.name })} onClick={() => revoke(props.keyOf(row))} disabled={action.busy}>
                        {t(words.button)}
                      </button>
                    </td>
                  </tr>
                ))}
              </tbody>
            </table>
          )
        }
      </Loaded>
      <OutcomeText outcome={action.outcome} />
    </Section>
  );
}

interface ApiKeyRow {
  id: number | string;
  name: string;
  prefix: string;
  scopes: string[];
  expiresAt: string | null;
  lastUsedAt: string | null;
}

const API_KEY_WORDS: RevocableWords = {
  title: "apiKeys.title",
  none: "apiKeys.none",
  columns: ["apiKeys.name", "apiKeys.prefix", "apiKeys.scopes", "apiKeys.lastUsed", "apiKeys.expires", "apiKeys.actions"],
  button: "apiKeys.revoke",
  buttonOf: "apiKeys.revokeOf",
  done: "apiKeys.revoked",
};

function ApiKeys() {
  const { t, lang } = usePage();
  return (
    <RevocableList<ApiKeyRow>
      id="api-keys"
      path="/api/account/api-keys"
      words={API_KEY_WORDS}
      keyOf={(row) => String(row.id)}
      cells={(row) => (
        <>
          <td>{row.name}</td>
          <td>
            <code>{row.prefix}</code>
          </td>
          <td>{row.scopes.join(", ")}</td>
          <td>{dateTime(lang, row.lastUsedAt, t("common.never"))}</td>
          <td>{dateTime(lang, row.expiresAt, t("common.never"))}</td>
        </>
      )}
    />
  );
}

interface AppRow {
  clientId: string;
  name: string;
  scopes: string[];
  createdAt: string;
}

const APP_WORDS: RevocableWords = {
  title: "apps.title",
  none: "apps.none",
  columns: ["apps.name", "apps.scopes", "apps.since", "apps.actions"],
  button: "apps.withdraw",
  buttonOf: "apps.withdrawOf",
  done: "apps.withdrawn",
};

/** The apps the user consented to (shown only where the server is an OpenID Provider). */
function AppsWithAccess() {
  const { t, lang } = usePage();
  return (
    <RevocableList<AppRow>
      id="apps"
      path="/api/account/apps"
      words={APP_WORDS}
      keyOf={(row) => row.clientId}
      cells={(row) => (
        <>
          <td>{row.name}</td>
          <td>
            <ul class="plain">
              {row.scopes.map((scope) => (
                <li key={scope}>{scopeWords(t, scope)}</li>
              ))}
            </ul>
          </td>
          <td>{dateTime(lang, row.createdAt, t("common.never"))}</td>
        </>
      )}
    />
  );
}

export function Security({ email, back, onSignOut, onEnded }: { email: string; back?: AccountFlowReturn; onSignOut(): void; onEnded: OnEnded }) {
  const { t, provider } = usePage();
  // A passkey added may bring the first recovery codes: the recovery section reads its summary again.
  const [factorsChanged, setFactorsChanged] = useState(0);
  // A link to a section (the setup page's #passkeys, #totp) moves the focus to its heading.
  useEffect(() => {
    const target = location.hash && document.getElementById(`${location.hash.slice(1)}-title`);
    if (target) target.focus();
  }, []);
  return (
    <main>
      <header class="bar">
        <h1>{t("security.title")}</h1>
        <p>
          {t("security.signedInAs", { email })}{" "}
          <button type="button" onClick={onSignOut}>
            {t("security.signOut")}
          </button>
        </p>
      </header>
      <nav aria-label={t("security.nav")}>
        <ul>
          {(["sessions", "totp", "recovery", "passkeys", "api-keys", ...(provider ? (["apps"] as const) : []), "identities"] as const).map((id) => (
            <li key={id}>
              <a href={`#${id}`}>{t(`${id === "api-keys" ? "apiKeys" : id}.title` as MessageKey)}</a>
            </li>
          ))}
        </ul>
      </nav>
      <ProviderSections email={email} back={back}>
        <Sessions />
        <SecondFactors email={email} onEnded={onEnded} changed={factorsChanged} />
        <Passkeys email={email} onEnded={onEnded} onAdded={() => setFactorsChanged((n) => n + 1)} />
        <ApiKeys />
        {provider && <AppsWithAccess />}
      </ProviderSections>
    </main>
  );
}
