/** Orders: every order (the ADMIN sees all), by status and user, paged, with their items. */
import { useState } from "preact/hooks";
import type { Order } from "../api";
import { href, navigate, useConsole, useRoute } from "../app-context";
import { Field, Loaded, numeric, Pager, ScreenTitle, Table, useLoad, useOnChange, inputValue } from "../components";

const STATUSES = ["PENDING", "PAID", "PAYMENT_FAILED"] as const;
const SIZE = 20;

export function Orders() {
  const { api, t, fmt } = useConsole();
  const { query } = useRoute();
  const page = Number(query.get("page") ?? 0);
  const status = query.get("status") ?? "";
  const userId = query.get("userId") ?? "";
  const [draftUser, setDraftUser] = useState(userId);
  useOnChange(() => setDraftUser(userId), [userId]);
  const search = href("", { page, size: SIZE, status, userId }).slice(1);
  const list = useLoad(() => api.page<Order>(`/api/orders${search}`), [search]);
  return (
    <section>
      <ScreenTitle>{t("orders.title")}</ScreenTitle>
      <form
        class="filters"
        onSubmit={(e) => {
          e.preventDefault();
          navigate("/orders", { status, userId: draftUser });
        }}
      >
        <Field label={t("common.status")}>
          {(id) => (
            <select id={id} value={status} onChange={(e) => navigate("/orders", { status: inputValue(e), userId })}>
              <option value="">{t("common.any")}</option>
              {STATUSES.map((s) => (
                <option key={s} value={s}>
                  {t(`status.${s}`)}
                </option>
              ))}
            </select>
          )}
        </Field>
        <Field label={t("orders.user")}>{(id) => <input id={id} type="number" min="1" inputMode="numeric" value={draftUser} onInput={(e) => setDraftUser(inputValue(e))} />}</Field>
        <div class="buttons">
          <button type="submit" class="primary">
            {t("common.search")}
          </button>
        </div>
      </form>
      <Loaded load={list} isEmpty={(data) => data.items.length === 0} empty={status || userId ? t("state.noMatch") : t("state.empty")}>
        {(data) => (
          <>
            <Table
              caption={t("orders.title")}
              columns={[t("orders.id"), t("orders.user"), t("common.status"), t("orders.items"), numeric(t("orders.total")), t("common.createdAt"), t("orders.paidAt")]}
            >
              {data.items.map((o) => (
                <tr key={o.id}>
                  <td>#{o.id}</td>
                  <td>
                    <a href={href(`/users/${o.userId}`)}>#{o.userId}</a>
                  </td>
                  <td>
                    <span class={`badge status-${o.status.toLowerCase()}`}>{t(`status.${o.status}`)}</span>
                  </td>
                  <td>{o.orderItems.map((item) => `${item.productName} × ${item.quantity}`).join(", ")}</td>
                  <td class="num">{o.totalAmount.toFixed(2)}</td>
                  <td>{fmt.dateTime(o.createdAt)}</td>
                  <td>{fmt.dateTime(o.paidAt)}</td>
                </tr>
              ))}
            </Table>
            <Pager page={page} size={SIZE} total={data.total} onPage={(p) => navigate("/orders", { status, userId, page: p })} label={t("orders.title")} />
          </>
        )}
      </Loaded>
    </section>
  );
}
