/** Departments: each with its number of users (a link to them), and a form to add one. */
import { useState } from "preact/hooks";
import type { Department } from "../api";
import { href, useConsole } from "../app-context";
import { ErrorText, Field, Loaded, ScreenTitle, Table, useAction, useLoad, inputValue } from "../components";

export function Departments() {
  const { api, t, fmt, announce } = useConsole();
  const list = useLoad(() => api.get<Department[]>("/api/departments"), []);
  const [draft, setDraft] = useState({ name: "", description: "" });
  const action = useAction();
  const create = async (event: Event) => {
    event.preventDefault();
    const created = await action.run(() => api.post<Department>("/api/departments", { name: draft.name, description: draft.description || null }));
    if (!created) return;
    setDraft({ name: "", description: "" });
    announce(t("state.saved"));
    list.reload();
  };
  return (
    <section>
      <ScreenTitle>{t("departments.title")}</ScreenTitle>
      <Loaded load={list} isEmpty={(data) => data.length === 0}>
        {(data) => (
          <Table caption={t("departments.title")} columns={[t("common.name"), t("common.description"), t("departments.users"), t("common.createdAt")]}>
            {data.map((d) => (
              <tr key={d.id}>
                <td>{d.name}</td>
                <td>{d.description ?? t("common.none")}</td>
                <td>
                  <a href={href("/users", { department: d.name })} aria-label={t("departments.usersOf", { name: d.name, count: fmt.number(d.userCount) })}>
                    {fmt.number(d.userCount)}
                  </a>
                </td>
                <td>{fmt.dateTime(d.createdAt)}</td>
              </tr>
            ))}
          </Table>
        )}
      </Loaded>
      <form class="panel inline" onSubmit={create} aria-labelledby="new-department">
        <h2 id="new-department">{t("departments.new")}</h2>
        <Field label={t("common.name")}>{(id) => <input id={id} required maxLength={50} value={draft.name} onInput={(e) => setDraft({ ...draft, name: inputValue(e) })} />}</Field>
        <Field label={t("common.description")}>
          {(id) => <input id={id} maxLength={255} value={draft.description} onInput={(e) => setDraft({ ...draft, description: inputValue(e) })} />}
        </Field>
        <ErrorText error={action.error} />
        <button type="submit" class="primary" disabled={action.busy}>
          {t("common.create")}
        </button>
      </form>
    </section>
  );
}
