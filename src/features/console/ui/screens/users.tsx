/** Users: filters (name, e-mail, department, active), sortable columns, paging and the total; each row opens the user. */
import { useState } from "preact/hooks";
import type { Department, User } from "../api";
import { href, navigate, useConsole, useRoute } from "../app-context";
import { Field, Loaded, Pager, ScreenTitle, Table, useLoad, useOnChange, inputValue, type Column } from "../components";
import type { MessageKey } from "../i18n";

const SIZES = [10, 20, 50, 100];
const COLUMNS: [field: string | undefined, label: MessageKey][] = [
  ["name", "users.name"],
  ["email", "users.email"],
  [undefined, "users.department"],
  [undefined, "users.roles"],
  ["active", "users.active"],
  ["lastLogin", "users.lastLogin"],
];

export function Users() {
  const { api, t, fmt } = useConsole();
  const { query } = useRoute();
  const filters = { name: query.get("name") ?? "", email: query.get("email") ?? "", department: query.get("department") ?? "", active: query.get("active") ?? "any" };
  const page = Number(query.get("page") ?? 0);
  const size = Number(query.get("size") ?? 20);
  const [sortField, sortDirection = "asc"] = (query.get("sort") ?? "id,asc").split(",");
  const [draft, setDraft] = useState(filters);
  // The address is the truth (back, forward, a link from another screen): the form follows it.
  useOnChange(() => setDraft(filters), [query.toString()]);
  const departments = useLoad(() => api.get<Department[]>("/api/departments"), []);

  const go = (changes: Record<string, string | number | undefined>) =>
    navigate("/users", { ...filters, page, size, sort: `${sortField},${sortDirection}`, ...changes, ...(changes.page === undefined ? { page: 0 } : {}) });
  const search = href("", { ...filters, page, size, sort: `${sortField},${sortDirection}` }).slice(1);
  const users = useLoad(() => api.page<User>(`/api/users${search}`), [search]);
  const filtered = Object.entries(filters).some(([key, value]) => value !== "" && !(key === "active" && value === "any"));

  return (
    <section>
      <ScreenTitle>{t("users.title")}</ScreenTitle>
      <form
        class="filters"
        aria-label={t("users.filters")}
        onSubmit={(event) => {
          event.preventDefault();
          go(draft);
        }}
      >
        <Field label={t("users.name")}>{(id) => <input id={id} type="search" value={draft.name} onInput={(e) => setDraft({ ...draft, name: inputValue(e) })} />}</Field>
        <Field label={t("users.email")}>{(id) => <input id={id} type="search" value={draft.email} onInput={(e) => setDraft({ ...draft, email: inputValue(e) })} />}</Field>
        <Field label={t("users.department")}>
          {(id) => (
            <select id={id} value={draft.department} onChange={(e) => setDraft({ ...draft, department: inputValue(e) })}>
              <option value="">{t("common.any")}</option>
              {departments.state === "ready" &&
                departments.data.map((d) => (
                  <option key={d.id} value={d.name}>
                    {d.name}
                  </option>
                ))}
            </select>
          )}
        </Field>
        <Field label={t("users.active")}>
          {(id) => (
            <select id={id} value={draft.active} onChange={(e) => setDraft({ ...draft, active: inputValue(e) })}>
              <option value="any">{t("common.any")}</option>
              <option value="true">{t("users.activeOnly")}</option>
              <option value="false">{t("users.inactiveOnly")}</option>
            </select>
          )}
        </Field>
        <Field label={t("common.pageSize")}>
          {(id) => (
            <select id={id} value={String(size)} onChange={(e) => go({ size: Number(inputValue(e)) })}>
              {SIZES.map((n) => (
                <option key={n} value={String(n)}>
                  {n}
                </option>
              ))}
            </select>
          )}
        </Field>
        <div class="buttons">
          <button type="submit" class="primary">
            {t("common.search")}
          </button>
          <button
            type="button"
            onClick={() => {
              setDraft({ name: "", email: "", department: "", active: "any" });
              navigate("/users");
            }}
          >
            {t("common.clear")}
          </button>
        </div>
      </form>
      <Loaded load={users} isEmpty={(data) => data.items.length === 0} empty={filtered ? t("state.noMatch") : t("state.empty")}>
        {(data) => (
          <>
            <Table
              caption={t("users.title")}
              columns={COLUMNS.map(([field, label]): Column => {
                if (!field) return t(label);
                const sorted = field === sortField;
                return {
                  key: label,
                  sort: sorted ? (sortDirection === "desc" ? "descending" : "ascending") : undefined,
                  label: (
                    <button type="button" class="sort" onClick={() => go({ sort: `${field},${sorted && sortDirection === "asc" ? "desc" : "asc"}` })}>
                      {t(label)} <span aria-hidden="true">{sorted ? (sortDirection === "desc" ? "▼" : "▲") : "↕"}</span>
                    </button>
                  ),
                };
              })}
            >
              {data.items.map((user) => (
                <tr key={user.id}>
                  <td>
                    <a href={href(`/users/${user.id}`)}>{user.name}</a>
                  </td>
                  <td>{user.email}</td>
                  <td>{user.department ?? t("common.none")}</td>
                  <td>{user.roles.join(", ")}</td>
                  <td>
                    <span class={user.active ? "badge ok" : "badge off"}>{user.active ? t("users.isActive") : t("users.isInactive")}</span>
                  </td>
                  <td>{fmt.dateTime(user.lastLogin)}</td>
                </tr>
              ))}
            </Table>
            <Pager page={page} size={size} total={data.total} onPage={(p) => go({ page: p })} label={t("users.title")} />
          </>
        )}
      </Loaded>
    </section>
  );
}
