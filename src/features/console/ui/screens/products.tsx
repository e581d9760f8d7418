/** Products: paged, by status; a form creates one or edits the chosen one (PUT replaces it). */
import { useState } from "preact/hooks";
import type { Product } from "../api";
import { navigate, useConsole, useRoute } from "../app-context";
import { ErrorText, Field, Loaded, numeric, Pager, ScreenTitle, Table, useAction, useLoad, inputValue } from "../components";

const STATUSES = ["ACTIVE", "INACTIVE", "DISCONTINUED"] as const;
const SIZE = 20;
const blank = { name: "", code: "", price: "0", stock: "0", status: "ACTIVE", description: "" };

export function Products() {
  const { api, t, fmt, announce } = useConsole();
  const { query } = useRoute();
  const page = Number(query.get("page") ?? 0);
  const status = query.get("status") ?? "";
  const list = useLoad(() => api.page<Product>(`/api/products?page=${page}&size=${SIZE}${status ? `&status=${status}` : ""}`), [page, status]);
  const [editing, setEditing] = useState<Product | undefined>();
  const [draft, setDraft] = useState(blank);
  const action = useAction();
  const edit = (product?: Product) => {
    setEditing(product);
    action.clear();
    setDraft(
      product
        ? { name: product.name, code: product.code, price: String(product.price), stock: String(product.stock), status: product.status, description: product.description ?? "" }
        : blank,
    );
    document.getElementById("product-form-title")?.focus();
  };
  const save = async (event: Event) => {
    event.preventDefault();
    const body = { ...draft, price: Number(draft.price), stock: Number(draft.stock), description: draft.description || undefined };
    const saved = await action.run(() => (editing ? api.put<Product>(`/api/products/${editing.id}`, body) : api.post<Product>("/api/products", body)));
    if (!saved) return;
    announce(t("state.saved"));
    edit(undefined);
    list.reload();
  };
  const set = (key: keyof typeof blank) => (e: { currentTarget: { value: string } }) => setDraft({ ...draft, [key]: inputValue(e) });

  return (
    <section>
      <ScreenTitle>{t("products.title")}</ScreenTitle>
      <div class="filters">
        <Field label={t("common.status")}>
          {(id) => (
            <select id={id} value={status} onChange={(e) => navigate("/products", { status: inputValue(e) })}>
              <option value="">{t("common.any")}</option>
              {STATUSES.map((s) => (
                <option key={s} value={s}>
                  {t(`status.${s}`)}
                </option>
              ))}
            </select>
          )}
        </Field>
      </div>
      <Loaded load={list} isEmpty={(data) => data.items.length === 0}>
        {(data) => (
          <>
            <Table
              caption={t("products.title")}
              columns={[t("common.name"), t("products.code"), numeric(t("products.price")), numeric(t("products.stock")), t("common.status"), t("common.actions")]}
            >
              {data.items.map((p) => (
                <tr key={p.id}>
                  <td>{p.name}</td>
                  <td>{p.code}</td>
                  <td class="num">{p.price.toFixed(2)}</td>
                  <td class="num">{fmt.number(p.stock)}</td>
                  <td>{t(`status.${p.status}`)}</td>
                  <td>
                    <button type="button" aria-label={t("products.edit", { name: p.name })} onClick={() => edit(p)}>
                      {t("common.edit")}
                    </button>
                  </td>
                </tr>
              ))}
            </Table>
            <Pager page={page} size={SIZE} total={data.total} onPage={(p) => navigate("/products", { status, page: p })} label={t("products.title")} />
          </>
        )}
      </Loaded>
      <form class="panel" onSubmit={save} aria-labelledby="product-form-title">
        <h2 id="product-form-title" tabIndex={-1}>
          {editing ? t("products.edit", { name: editing.name }) : t("products.new")}
        </h2>
        <div class="grid">
          <Field label={t("common.name")}>{(id) => <input id={id} required value={draft.name} onInput={set("name")} />}</Field>
          <Field label={t("products.code")}>{(id) => <input id={id} required value={draft.code} onInput={set("code")} />}</Field>
          <Field label={t("products.price")}>{(id) => <input id={id} type="number" min="0" step="0.01" required value={draft.price} onInput={set("price")} />}</Field>
          <Field label={t("products.stock")}>{(id) => <input id={id} type="number" min="0" step="1" required value={draft.stock} onInput={set("stock")} />}</Field>
          <Field label={t("common.status")}>
            {(id) => (
              <select id={id} value={draft.status} onChange={set("status")}>
                {STATUSES.map((s) => (
                  <option key={s} value={s}>
                    {t(`status.${s}`)}
                  </option>
                ))}
              </select>
            )}
          </Field>
          <Field label={t("common.description")}>{(id) => <input id={id} value={draft.description} onInput={set("description")} />}</Field>
        </div>
        <ErrorText error={action.error} />
        <div class="buttons">
          <button type="submit" class="primary" disabled={action.busy}>
            {editing ? t("common.save") : t("common.create")}
          </button>
          {editing && (
            <button type="button" onClick={() => edit(undefined)}>
              {t("common.cancel")}
            </button>
          )}
        </div>
      </form>
    </section>
  );
}
