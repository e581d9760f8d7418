/** The audit log: newest first, paged, optionally of one action. */
import { useState } from "preact/hooks";
import type { AuditEntry } from "../api";
import { href, navigate, useConsole, useRoute } from "../app-context";
import { Field, Loaded, Pager, ScreenTitle, Table, useLoad, useOnChange, inputValue } from "../components";

const SIZE = 20;

export function Audit() {
  const { api, t, fmt } = useConsole();
  const { query } = useRoute();
  const page = Number(query.get("page") ?? 0);
  const action = query.get("action") ?? "";
  const [draft, setDraft] = useState(action);
  useOnChange(() => setDraft(action), [action]);
  const search = href("", { page, size: SIZE, action }).slice(1);
  const list = useLoad(() => api.page<AuditEntry>(`/api/audit${search}`), [search]);
  return (
    <section>
      <ScreenTitle>{t("audit.title")}</ScreenTitle>
      <form
        class="filters"
        onSubmit={(e) => {
          e.preventDefault();
          navigate("/audit", { action: draft.trim().toUpperCase() });
        }}
      >
        <Field label={t("audit.action")} hint="USER_CREATED, USER_DEACTIVATED, USER_ROLES_SET …">
          {(id, hint) => <input id={id} aria-describedby={hint} value={draft} onInput={(e) => setDraft(inputValue(e))} />}
        </Field>
        <div class="buttons">
          <button type="submit" class="primary">
            {t("common.search")}
          </button>
        </div>
      </form>
      <Loaded load={list} isEmpty={(data) => data.items.length === 0} empty={action ? t("state.noMatch") : t("state.empty")}>
        {(data) => (
          <>
            <Table caption={t("audit.title")} columns={[t("audit.time"), t("audit.action"), t("audit.actor"), t("audit.subject"), t("audit.details")]}>
              {data.items.map((entry) => (
                <tr key={entry.id}>
                  <td>{fmt.dateTime(entry.createdAt)}</td>
                  <td>
                    <code>{entry.action}</code>
                  </td>
                  <td>{entry.actor}</td>
                  <td>
                    {entry.subjectType === "User" && /^\d+$/.test(entry.subjectId) ? (
                      <a href={href(`/users/${entry.subjectId}`)}>
                        {entry.subjectType} #{entry.subjectId}
                      </a>
                    ) : (
                      `${entry.subjectType} ${entry.subjectId}`
                    )}
                  </td>
                  <td>{entry.details ? <code>{JSON.stringify(entry.details)}</code> : t("common.none")}</td>
                </tr>
              ))}
            </Table>
            <Pager page={page} size={SIZE} total={data.total} onPage={(p) => navigate("/audit", { action, page: p })} label={t("audit.title")} />
          </>
        )}
      </Loaded>
    </section>
  );
}
