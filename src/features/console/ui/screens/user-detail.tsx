/**
 * One user: details saved with If-Match (a concurrent change is a 409 with a reload), roles,
 * activate/deactivate, revoke tokens, unlock sign-in, second factors (removed all at once after
 * confirmation), the providers linked to the account, the user's API keys (revoke after confirmation), the signed-in devices (each can be
 * ended), delete after confirmation, and the profile.
 */
import { useState } from "preact/hooks";
import type { LinkedIdentity } from "../../../../http/browser/provider-flow";
import type { ApiKey, Department, DeviceSession, Factor, Profile, User } from "../api";
import { href, navigate, useConsole } from "../app-context";
import { Confirm, ErrorText, Field, Loaded, ScreenTitle, Table, useAction, useLoad, inputValue } from "../components";

export function UserDetail({ id }: { id?: string }) {
  const { api, t } = useConsole();
  const loaded = useLoad(() => api.get<User>(`/api/users/${id}`), [id]);
  return (
    <section>
      <p>
        <a href={href("/users")}>← {t("common.back")}</a>
      </p>
      <Loaded load={loaded}>{(user) => <UserScreen initial={user} reload={loaded.reload} />}</Loaded>
    </section>
  );
}

function UserScreen({ initial, reload }: { initial: User; reload(): void }) {
  const { t, fmt, announce } = useConsole();
  // A reload mounts this anew (the screen passes through its loading state), so no syncing is needed.
  const [user, setUser] = useState(initial);
  const changed = (next: User, message = t("state.saved")) => {
    setUser(next);
    announce(message);
  };

  return (
    <>
      <ScreenTitle>{t("user.title", { name: user.name })}</ScreenTitle>
      <p class="meta">
        {user.email} · {t("user.version", { version: user.version })} · {t("common.createdAt")}: {fmt.dateTime(user.createdAt)} · {t("users.lastLogin")}:{" "}
        {fmt.dateTime(user.lastLogin)}
      </p>
      <div class="panels">
        {/* Keyed by version: a saved change starts the forms afresh from what the server answered. */}
        <DetailsForm key={`details-${user.version}`} user={user} onSaved={changed} onReload={reload} />
        <RolesForm key={`roles-${user.version}`} user={user} onSaved={changed} />
        <AccessPanel user={user} onChanged={changed} />
        <FactorsPanel user={user} />
        <IdentitiesPanel userId={user.id} />
        <ApiKeysPanel userId={user.id} />
        <ProfileForm userId={user.id} />
      </div>
      {/* Deactivation ends every session: the list is read again. */}
      <SessionsPanel key={`sessions-${user.active}`} userId={user.id} />
      <DeletePanel user={user} />
    </>
  );
}

function DetailsForm({ user, onSaved, onReload }: { user: User; onSaved(user: User): void; onReload(): void }) {
  const { api, t } = useConsole();
  const [draft, setDraft] = useState({ name: user.name, email: user.email, department: user.department ?? "" });
  const departments = useLoad(() => api.get<Department[]>("/api/departments"), []);
  const action = useAction();
  const conflict = action.error?.code === "OPTIMISTIC_LOCK_CONFLICT";

  const save = async (event: Event) => {
    event.preventDefault();
    // If-Match carries the version this form was filled from: a change by anyone since is a 409.
    const saved = await action.run(() => api.patch<User>(`/api/users/${user.id}`, draft, { "if-match": `"${user.version}"` }));
    if (saved) onSaved(saved);
  };

  return (
    <form class="panel" onSubmit={save} aria-labelledby="details-title">
      <h2 id="details-title">{t("user.edit")}</h2>
      <Field label={t("users.name")}>{(id) => <input id={id} value={draft.name} required onInput={(e) => setDraft({ ...draft, name: inputValue(e) })} />}</Field>
      <Field label={t("users.email")}>{(id) => <input id={id} type="email" value={draft.email} required onInput={(e) => setDraft({ ...draft, email: inputValue(e) })} />}</Field>
      <Field label={t("users.department")}>
        {(id) => (
          <>
            <input id={id} list={`${id}-list`} value={draft.department} onInput={(e) => setDraft({ ...draft, department: inputValue(e) })} />
            <datalist id={`${id}-list`}>{departments.state === "ready" && departments.data.map((d) => <option key={d.id} value={d.name} />)}</datalist>
          </>
        )}
      </Field>
      <Field label={t("user.phone")}>{(id) => <input id={id} value={user.phone ?? ""} readOnly />}</Field>
      {conflict ? (
        <div class="form-error" role="alert">
          <p>{t("user.conflict")}</p>
          <button
            type="button"
            onClick={() => {
              action.clear();
              onReload();
            }}
          >
            {t("user.conflictReload")}
          </button>
        </div>
      ) : (
        <ErrorText error={action.error} />
      )}
      <button type="submit" class="primary" disabled={action.busy}>
        {t("common.save")}
      </button>
    </form>
  );
}

function RolesForm({ user, onSaved }: { user: User; onSaved(user: User): void }) {
  const { api, t } = useConsole();
  const roles = useLoad(() => api.get<{ id: number; name: string; description: string | null }[]>("/api/roles"), []);
  const [chosen, setChosen] = useState(user.roles);
  const action = useAction();
  const save = async (event: Event) => {
    event.preventDefault();
    const saved = await action.run(() => api.put<User>(`/api/users/${user.id}/roles`, { roles: chosen }));
    if (saved) onSaved(saved);
  };
  return (
    <form class="panel" onSubmit={save}>
      <fieldset>
        <legend>
          <h2>{t("user.rolesTitle")}</h2>
        </legend>
        <Loaded load={roles}>
          {(list) =>
            list.map((role) => (
              <label key={role.id} class="check">
                <input
                  type="checkbox"
                  name="roles"
                  value={role.name}
                  checked={chosen.includes(role.name)}
                  onChange={(e) => setChosen(e.currentTarget.checked ? [...chosen, role.name] : chosen.filter((r) => r !== role.name))}
                />
                {role.name}
                {role.description && <span class="hint"> — {role.description}</span>}
              </label>
            ))
          }
        </Loaded>
      </fieldset>
      <ErrorText error={action.error} />
      <button type="submit" class="primary" disabled={action.busy || chosen.length === 0}>
        {t("user.rolesSave")}
      </button>
    </form>
  );
}

function AccessPanel({ user, onChanged }: { user: User; onChanged(user: User, message?: string): void }) {
  const { api, t, announce } = useConsole();
  const action = useAction();
  const toggle = async () => {
    const next = await action.run(() => api.post<User>(`/api/users/${user.id}/${user.active ? "deactivate" : "activate"}`));
    if (next) onChanged(next);
  };
  /** A POST that answers 204, announced when done. */
  const post = (path: string, done: "user.revoked" | "user.unlocked") => async () => {
    const ok = await action.run(async () => {
      await api.post(`/api/users/${user.id}/${path}`);
      return true;
    });
    if (ok) announce(t(done));
  };
  return (
    <div class="panel">
      <h2>{t("user.access")}</h2>
      <p>
        <span class={user.active ? "badge ok" : "badge off"}>{user.active ? t("users.isActive") : t("users.isInactive")}</span>
      </p>
      <p class="hint" id="deactivate-hint">
        {t("user.deactivateHint")}
      </p>
      <div class="buttons">
        <button type="button" onClick={toggle} disabled={action.busy} aria-describedby={user.active ? "deactivate-hint" : undefined}>
          {user.active ? t("user.deactivate") : t("user.activate")}
        </button>
        <button type="button" onClick={post("revoke-tokens", "user.revoked")} disabled={action.busy} aria-describedby="revoke-hint">
          {t("user.revoke")}
        </button>
        <button type="button" onClick={post("unlock", "user.unlocked")} disabled={action.busy} aria-describedby="unlock-hint">
          {t("user.unlock")}
        </button>
      </div>
      <p class="hint" id="revoke-hint">
        {t("user.revokeHint")}
      </p>
      <p class="hint" id="unlock-hint">
        {t("user.unlockHint")}
      </p>
      <ErrorText error={action.error} />
    </div>
  );
}

/** A DELETE run as a panel's action (busy while it runs, its error shown): whether it was done. */
const deleted = async (action: ReturnType<typeof useAction>, api: ReturnType<typeof useConsole>["api"], path: string) =>
  (await action.run(async () => {
    await api.delete(path);
    return true;
  })) === true;

/** The user's API keys (never the keys themselves: a prefix names each), each revocable after confirmation. */
function ApiKeysPanel({ userId }: { userId: number }) {
  const { api, t, fmt, announce } = useConsole();
  const keys = useLoad(() => api.get<ApiKey[]>(`/api/users/${userId}/api-keys`), [userId]);
  const action = useAction();
  const [revoking, setRevoking] = useState<ApiKey | undefined>();
  const revoke = async () => {
    const key = revoking!;
    setRevoking(undefined);
    if (!(await deleted(action, api, `/api/users/${userId}/api-keys/${key.id}`))) return;
    announce(t("user.apiKeyRevoked", { name: key.name }));
    keys.reload();
  };
  return (
    <section class="panel" aria-labelledby="api-keys-title">
      <h2 id="api-keys-title">{t("user.apiKeys")}</h2>
      <Loaded load={keys} isEmpty={(data) => data.length === 0} empty={t("user.apiKeysNone")}>
        {(data) => (
          <Table caption={t("user.apiKeys")} columns={[t("user.apiKeyName"), t("user.apiKeyScopes"), t("user.apiKeyLastUsed"), t("user.apiKeyExpires"), t("common.actions")]}>
            {data.map((key) => (
              <tr key={key.id}>
                <td>
                  {key.name} <code>usk_{key.prefix}_…</code>
                </td>
                <td>{key.scopes.join(", ")}</td>
                <td>{key.lastUsedAt ? `${fmt.dateTime(key.lastUsedAt)}${key.lastUsedFrom ? ` (${key.lastUsedFrom})` : ""}` : t("common.none")}</td>
                <td>{key.expiresAt ? fmt.dateTime(key.expiresAt) : t("common.none")}</td>
                <td>
                  <button type="button" class="danger" aria-label={t("user.apiKeyRevoke", { name: key.name })} onClick={() => setRevoking(key)} disabled={action.busy}>
                    {t("user.apiKeyRevokeShort")}
                  </button>
                </td>
              </tr>
            ))}
          </Table>
        )}
      </Loaded>
      <ErrorText error={action.error} />
      <Confirm
        open={revoking !== undefined}
        title={t("user.apiKeyRevoke", { name: revoking?.name ?? "" })}
        message={t("user.apiKeyRevokeConfirm", { name: revoking?.name ?? "", prefix: revoking?.prefix ?? "" })}
        confirmLabel={t("user.apiKeyRevokeShort")}
        onConfirm={revoke}
        onCancel={() => setRevoking(undefined)}
      />
    </section>
  );
}

/** The user's second factors (TOTP, passkeys, recovery codes) and their removal, which signs the user out everywhere. */
/** The other providers the user signs in with (GET /api/users/{id}/identities): read only, the user unlinks them. */
function IdentitiesPanel({ userId }: { userId: number }) {
  const { api, t, fmt } = useConsole();
  const identities = useLoad(() => api.get<LinkedIdentity[]>(`/api/users/${userId}/identities`), [userId]);
  return (
    <section class="panel" aria-labelledby="identities-title">
      <h2 id="identities-title">{t("user.identities")}</h2>
      <Loaded load={identities}>
        {(list) =>
          list.length === 0 ? (
            <p>{t("user.identitiesNone")}</p>
          ) : (
            <ul>
              {list.map((identity) => (
                <li key={identity.id}>
                  {identity.label}
                  {identity.email && ` (${identity.email})`} · {t("user.identityLinked")}: {fmt.dateTime(identity.linkedAt)} · {t("user.identityLastUsed")}:{" "}
                  {fmt.dateTime(identity.lastUsedAt)}
                </li>
              ))}
            </ul>
          )
        }
      </Loaded>
    </section>
  );
}

function FactorsPanel({ user }: { user: User }) {
  const { api, t, fmt, announce } = useConsole();
  const factors = useLoad(() => api.get<Factor[]>(`/api/users/${user.id}/mfa`), [user.id]);
  const [asking, setAsking] = useState(false);
  const action = useAction();
  const remove = async () => {
    setAsking(false);
    if (!(await deleted(action, api, `/api/users/${user.id}/mfa`))) return;
    announce(t("user.factorsRemoved"));
    factors.reload();
  };
  return (
    <section class="panel" aria-labelledby="factors-title">
      <h2 id="factors-title">{t("user.factors")}</h2>
      <Loaded load={factors}>
        {(list) =>
          list.length === 0 ? (
            <p>{t("user.factorsNone")}</p>
          ) : (
            <>
              <ul>
                {list.map((factor, index) => (
                  <li key={`${factor.kind}-${index}`}>
                    {t(`user.factor.${factor.kind}`)}: {factor.name} · {t("common.createdAt")}: {fmt.dateTime(factor.createdAt)} · {t("user.factorLastUsed")}:{" "}
                    {fmt.dateTime(factor.lastUsedAt)}
                  </li>
                ))}
              </ul>
              <button type="button" class="danger" onClick={() => setAsking(true)} disabled={action.busy} aria-describedby="factors-hint">
                {t("user.factorsRemove")}
              </button>
              <p class="hint" id="factors-hint">
                {t("user.factorsRemoveHint")}
              </p>
            </>
          )
        }
      </Loaded>
      <ErrorText error={action.error} />
      <Confirm
        open={asking}
        title={t("user.factorsRemove")}
        message={t("user.factorsRemoveConfirm", { name: user.name, email: user.email })}
        confirmLabel={t("user.factorsRemove")}
        onConfirm={remove}
        onCancel={() => setAsking(false)}
      />
    </section>
  );
}

/** The user's open sessions, most recently active first, each with "End" (its tokens are refused at once). */
function SessionsPanel({ userId }: { userId: number }) {
  const { api, t, fmt, announce } = useConsole();
  const loaded = useLoad(() => api.get<DeviceSession[]>(`/api/users/${userId}/sessions`), [userId]);
  const action = useAction();
  const end = async (session: DeviceSession) => {
    if (!(await deleted(action, api, `/api/users/${userId}/sessions/${session.id}`))) return;
    announce(t("user.sessionEnded"));
    loaded.reload();
  };
  return (
    <section class="panel" aria-labelledby="sessions-title">
      <h2 id="sessions-title">{t("user.sessions")}</h2>
      <Loaded load={loaded} isEmpty={(list) => list.length === 0} empty={t("user.sessionsEmpty")}>
        {(list) => (
          <Table caption={t("user.sessions")} columns={[t("user.sessionDevice"), t("user.sessionAddress"), t("user.sessionLastSeen"), t("user.sessionAmr"), t("common.actions")]}>
            {list.map((session) => {
              const device = session.device ?? t("user.unknownDevice");
              return (
                <tr key={session.id}>
                  <td>{device}</td>
                  <td>{session.address}</td>
                  <td>{fmt.dateTime(session.lastSeenAt)}</td>
                  <td>{session.amr.join(", ")}</td>
                  <td>
                    <button type="button" onClick={() => end(session)} disabled={action.busy} aria-label={t("user.sessionEndLabel", { device })}>
                      {t("user.sessionEnd")}
                    </button>
                  </td>
                </tr>
              );
            })}
          </Table>
        )}
      </Loaded>
      <ErrorText error={action.error} />
    </section>
  );
}

function ProfileForm({ userId }: { userId: number }) {
  const { api, t } = useConsole();
  const loaded = useLoad(() => api.get<Profile>(`/api/users/${userId}/profile`), [userId]);
  return (
    <section class="panel" aria-labelledby="profile-title">
      <h2 id="profile-title">{t("user.profile")}</h2>
      <Loaded load={loaded}>{(profile) => <ProfileEditor profile={profile} />}</Loaded>
    </section>
  );
}

function ProfileEditor({ profile }: { profile: Profile }) {
  const { api, t, announce } = useConsole();
  const userId = profile.userId;
  const [draft, setDraft] = useState({ avatarUrl: profile.avatarUrl ?? "", bio: profile.bio ?? "", birthDate: profile.birthDate ?? "", address: profile.address ?? "" });
  const action = useAction();
  const save = async (event: Event) => {
    event.preventDefault();
    // The API replaces the whole profile; a cleared field is sent as null.
    const body = Object.fromEntries(Object.entries(draft).map(([key, value]) => [key, value === "" ? null : value]));
    if (await action.run(() => api.put<Profile>(`/api/users/${userId}/profile`, body))) announce(t("state.saved"));
  };
  return (
    <form onSubmit={save}>
      <Field label={t("user.avatarUrl")}>{(id) => <input id={id} type="url" value={draft.avatarUrl} onInput={(e) => setDraft({ ...draft, avatarUrl: inputValue(e) })} />}</Field>
      <Field label={t("user.birthDate")}>{(id) => <input id={id} type="date" value={draft.birthDate} onInput={(e) => setDraft({ ...draft, birthDate: inputValue(e) })} />}</Field>
      <Field label={t("user.address")}>{(id) => <input id={id} value={draft.address} onInput={(e) => setDraft({ ...draft, address: inputValue(e) })} />}</Field>
      <Field label={t("user.bio")}>{(id) => <textarea id={id} rows={3} value={draft.bio} onInput={(e) => setDraft({ ...draft, bio: inputValue(e) })} />}</Field>
      <ErrorText error={action.error} />
      <button type="submit" class="primary" disabled={action.busy}>
        {t("user.profileSave")}
      </button>
    </form>
  );
}

function DeletePanel({ user }: { user: User }) {
  const { api, t, announce } = useConsole();
  const [asking, setAsking] = useState(false);
  const action = useAction();
  const remove = async () => {
    setAsking(false);
    if (!(await deleted(action, api, `/api/users/${user.id}`))) return;
    announce(t("user.deleted"));
    navigate("/users");
  };
  return (
    <div class="panel danger-zone">
      <h2>{t("user.deleteTitle")}</h2>
      <button type="button" class="danger" onClick={() => setAsking(true)} disabled={action.busy}>
        {t("common.delete")}
      </button>
      <ErrorText error={action.error} />
      <Confirm
        open={asking}
        title={t("user.deleteTitle")}
        message={t("user.deleteConfirm", { name: user.name, email: user.email })}
        confirmLabel={t("common.delete")}
        onConfirm={remove}
        onCancel={() => setAsking(false)}
      />
    </div>
  );
}
