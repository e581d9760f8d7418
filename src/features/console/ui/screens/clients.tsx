/**
 * Apps (the OpenID Provider's clients, /api/oauth/clients): the registered ones, a form to
 * register one (its secret shown once, right after), and delete after confirmation, which ends
 * every token the app holds. Without OAUTH_SERVER=on the screen says the server is no provider.
 */
import { useState } from "preact/hooks";
import type { OAuthClient } from "../api";
import { useConsole } from "../app-context";
import { Confirm, ErrorText, Field, inputValue, Loaded, ScreenTitle, Table, useAction, useLoad } from "../components";

/** What a client may be allowed beyond openid, profile and email. */
const SCOPES = ["offline_access", "users:read", "users:write", "files:read", "files:write", "orders:read", "orders:write", "products:read", "products:write"];

const EMPTY = { name: "", redirectUris: "", postLogoutRedirectUris: "", public: false, firstParty: false, machine: false, scopes: [] as string[] };
const lines = (text: string) =>
  text
    .split("\n")
    .map((line) => line.trim())
    .filter(Boolean);

export function Clients() {
  const { api, t, fmt, announce } = useConsole();
  const list = useLoad(() => api.get<OAuthClient[]>("/api/oauth/clients"), []);
  const action = useAction();
  const [draft, setDraft] = useState(EMPTY);
  const [created, setCreated] = useState<OAuthClient | undefined>();
  const [deleting, setDeleting] = useState<OAuthClient | undefined>();

  const create = async (event: Event) => {
    event.preventDefault();
    const grantTypes = draft.machine ? ["authorization_code", "refresh_token", "client_credentials"] : undefined;
    const answer = await action.run(() =>
      api.post<OAuthClient>("/api/oauth/clients", {
        name: draft.name,
        redirectUris: lines(draft.redirectUris),
        postLogoutRedirectUris: lines(draft.postLogoutRedirectUris),
        public: draft.public,
        firstParty: draft.firstParty,
        scopes: draft.scopes,
        ...(grantTypes && { grantTypes }),
      }),
    );
    if (!answer) return;
    setDraft(EMPTY);
    setCreated(answer);
    announce(t("clients.created", { name: answer.name }));
    list.reload();
  };
  const remove = async () => {
    const client = deleting!;
    setDeleting(undefined);
    const done = await action.run(async () => {
      await api.delete(`/api/oauth/clients/${encodeURIComponent(client.clientId)}`);
      return true;
    });
    if (!done) return;
    if (created?.clientId === client.clientId) setCreated(undefined);
    announce(t("clients.deleted", { name: client.name }));
    list.reload();
  };
  const toggleScope = (scope: string, on: boolean) => setDraft({ ...draft, scopes: on ? [...draft.scopes, scope] : draft.scopes.filter((s) => s !== scope) });

  if (list.state === "error" && list.error.status === 404) {
    return (
      <section>
        <ScreenTitle>{t("clients.title")}</ScreenTitle>
        <p class="state" role="status">
          {t("clients.unavailable")}
        </p>
      </section>
    );
  }
  return (
    <section>
      <ScreenTitle>{t("clients.title")}</ScreenTitle>
      {created && (
        <div class="panel notice" role="status">
          <h2>{t("clients.createdTitle", { name: created.name })}</h2>
          <p>
            {t("clients.clientId")}: <code>{created.clientId}</code>
          </p>
          {created.clientSecret ? (
            <p>
              {t("clients.secret")}: <code class="secret">{created.clientSecret}</code> — {t("clients.secretOnce")}
            </p>
          ) : (
            <p>{t("clients.noSecret")}</p>
          )}
          <button type="button" onClick={() => setCreated(undefined)}>
            {t("clients.copied")}
          </button>
        </div>
      )}
      <Loaded load={list} isEmpty={(data) => data.length === 0} empty={t("clients.none")}>
        {(data) => (
          <Table
            caption={t("clients.title")}
            columns={[t("common.name"), t("clients.clientId"), t("clients.kind"), t("clients.extraScopes"), t("clients.redirectUris"), t("common.createdAt"), t("common.actions")]}
          >
            {data.map((c) => (
              <tr key={c.clientId}>
                <td>{c.name}</td>
                <td>
                  <code>{c.clientId}</code>
                </td>
                <td>
                  {t(c.public ? "clients.public" : "clients.confidential")}
                  {c.firstParty && ` · ${t("clients.firstParty")}`}
                </td>
                <td>{c.scopes.join(", ") || t("common.none")}</td>
                <td>{c.redirectUris.join(" ") || t("common.none")}</td>
                <td>{fmt.dateTime(c.createdAt)}</td>
                <td>
                  <button type="button" class="danger" aria-label={t("clients.deleteOf", { name: c.name })} onClick={() => setDeleting(c)}>
                    {t("common.delete")}
                  </button>
                </td>
              </tr>
            ))}
          </Table>
        )}
      </Loaded>
      <form class="panel inline" onSubmit={create} aria-labelledby="new-client">
        <h2 id="new-client">{t("clients.new")}</h2>
        <Field label={t("common.name")}>{(id) => <input id={id} required maxLength={200} value={draft.name} onInput={(e) => setDraft({ ...draft, name: inputValue(e) })} />}</Field>
        <Field label={t("clients.redirectUris")} hint={t("clients.onePerLine")}>
          {(id, hint) => <textarea id={id} aria-describedby={hint} rows={2} value={draft.redirectUris} onInput={(e) => setDraft({ ...draft, redirectUris: inputValue(e) })} />}
        </Field>
        <Field label={t("clients.postLogoutUris")} hint={t("clients.onePerLine")}>
          {(id, hint) => (
            <textarea
              id={id}
              aria-describedby={hint}
              rows={2}
              value={draft.postLogoutRedirectUris}
              onInput={(e) => setDraft({ ...draft, postLogoutRedirectUris: inputValue(e) })}
            />
          )}
        </Field>
        <label class="check">
          <input type="checkbox" checked={draft.public} onChange={(e) => setDraft({ ...draft, public: e.currentTarget.checked, machine: false })} />
          {t("clients.publicHint")}
        </label>
        <label class="check">
          <input type="checkbox" checked={draft.firstParty} onChange={(e) => setDraft({ ...draft, firstParty: e.currentTarget.checked })} />
          {t("clients.firstPartyHint")}
        </label>
        <label class="check">
          <input type="checkbox" checked={draft.machine} disabled={draft.public} onChange={(e) => setDraft({ ...draft, machine: e.currentTarget.checked })} />
          {t("clients.machineHint")}
        </label>
        <fieldset>
          <legend>{t("clients.scopes")}</legend>
          {SCOPES.map((scope) => (
            <label key={scope} class="check">
              <input type="checkbox" checked={draft.scopes.includes(scope)} onChange={(e) => toggleScope(scope, e.currentTarget.checked)} />
              <code>{scope}</code>
            </label>
          ))}
        </fieldset>
        <ErrorText error={action.error} />
        <button type="submit" class="primary" disabled={action.busy}>
          {t("common.create")}
        </button>
      </form>
      <Confirm
        open={deleting !== undefined}
        title={t("common.delete")}
        message={t("clients.deleteConfirm", { name: deleting?.name ?? "" })}
        confirmLabel={t("common.delete")}
        onConfirm={remove}
        onCancel={() => setDeleting(undefined)}
      />
    </section>
  );
}
