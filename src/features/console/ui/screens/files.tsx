/** Files: every stored file, newest first, paged, each downloadable with the ADMIN's token. */
import type { FileInfo } from "../api";
import { href, navigate, useConsole, useRoute } from "../app-context";
import { ErrorText, Loaded, numeric, Pager, ScreenTitle, Table, useAction, useLoad } from "../components";

const SIZE = 20;

export function Files() {
  const { api, t, fmt } = useConsole();
  const page = Number(useRoute().query.get("page") ?? 0);
  const list = useLoad(() => api.page<FileInfo>(`/api/files?page=${page}&size=${SIZE}`), [page]);
  const download = useAction();
  return (
    <section>
      <ScreenTitle>{t("files.title")}</ScreenTitle>
      <ErrorText error={download.error} />
      <Loaded load={list} isEmpty={(data) => data.items.length === 0}>
        {(data) => (
          <>
            <Table
              caption={t("files.title")}
              columns={[t("files.originalName"), numeric(t("files.size")), t("files.type"), t("files.uploadedBy"), t("files.uploadTime"), t("common.actions")]}
            >
              {data.items.map((f) => (
                <tr key={f.id}>
                  <td>{f.originalName}</td>
                  <td class="num">{fmt.bytes(f.fileSize)}</td>
                  <td>{f.contentType}</td>
                  <td>{f.uploadedBy === null ? t("common.none") : <a href={href(`/users/${f.uploadedBy}`)}>#{f.uploadedBy}</a>}</td>
                  <td>{fmt.dateTime(f.uploadTime)}</td>
                  <td>
                    <button
                      type="button"
                      aria-label={t("files.download", { name: f.originalName })}
                      disabled={download.busy}
                      onClick={() => download.run(() => api.download(`/api/files/download/${encodeURIComponent(f.fileName)}`, f.originalName))}
                    >
                      {t("common.download")}
                    </button>
                  </td>
                </tr>
              ))}
            </Table>
            <Pager page={page} size={SIZE} total={data.total} onPage={(p) => navigate("/files", { page: p })} label={t("files.title")} />
          </>
        )}
      </Loaded>
    </section>
  );
}
