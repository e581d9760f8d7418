/** Backups: the archives (newest first), a manual backup now, download and delete (after confirmation). */
import { useState } from "preact/hooks";
import type { Backup } from "../api";
import { useConsole } from "../app-context";
import { Confirm, ErrorText, Loaded, numeric, ScreenTitle, Table, useAction, useLoad } from "../components";

export function Backups() {
  const { api, t, fmt, announce } = useConsole();
  const list = useLoad(() => api.get<Backup[]>("/api/admin/backups"), []);
  const action = useAction();
  const [deleting, setDeleting] = useState<string | undefined>();
  const create = async () => {
    const created = await action.run(() => api.post<Backup>("/api/admin/backups"));
    if (!created) return;
    announce(t("backups.created", { name: created.name }));
    list.reload();
  };
  const remove = async () => {
    const name = deleting!;
    setDeleting(undefined);
    if (
      await action.run(async () => {
        await api.delete(`/api/admin/backups/${encodeURIComponent(name)}`);
        return true;
      })
    )
      list.reload();
  };
  const missing = list.state === "error" && list.error.status === 404;
  return (
    <section>
      <ScreenTitle>{t("backups.title")}</ScreenTitle>
      {missing ? (
        <p class="state" role="status">
          {t("backups.unavailable")}
        </p>
      ) : (
        <>
          <p>
            <button type="button" class="primary" onClick={create} disabled={action.busy}>
              {action.busy ? t("backups.creating") : t("backups.create")}
            </button>
          </p>
          <ErrorText error={action.error} />
          <Loaded load={list} isEmpty={(data) => data.length === 0}>
            {(data) => (
              <Table caption={t("backups.title")} columns={[t("backups.name"), numeric(t("backups.size")), t("common.createdAt"), t("common.actions")]}>
                {data.map((b) => (
                  <tr key={b.name}>
                    <td>
                      <code>{b.name}</code>
                    </td>
                    <td class="num">{fmt.bytes(b.size)}</td>
                    <td>{fmt.dateTime(b.createdAt)}</td>
                    <td>
                      <div class="buttons">
                        <button
                          type="button"
                          aria-label={t("backups.download", { name: b.name })}
                          onClick={() => action.run(() => api.download(`/api/admin/backups/${encodeURIComponent(b.name)}`, b.name))}
                        >
                          {t("common.download")}
                        </button>
                        <button type="button" class="danger" aria-label={t("backups.delete", { name: b.name })} onClick={() => setDeleting(b.name)}>
                          {t("common.delete")}
                        </button>
                      </div>
                    </td>
                  </tr>
                ))}
              </Table>
            )}
          </Loaded>
        </>
      )}
      <Confirm
        open={deleting !== undefined}
        title={t("common.delete")}
        message={t("backups.deleteConfirm", { name: deleting ?? "" })}
        confirmLabel={t("common.delete")}
        onConfirm={remove}
        onCancel={() => setDeleting(undefined)}
      />
    </section>
  );
}
