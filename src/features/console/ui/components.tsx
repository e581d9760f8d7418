/** The pieces every screen is made of: loading/empty/error states, paging, labelled fields, confirmation. */
import type { ComponentChildren } from "preact";
import { useCallback, useEffect, useId, useLayoutEffect, useRef, useState } from "preact/hooks";
import { ApiError } from "./api";
import { useConsole } from "./app-context";

export type Load<T> = { state: "loading" } | { state: "error"; error: ApiError } | { state: "ready"; data: T };

const asApiError = (error: unknown) => (error instanceof ApiError ? error : new ApiError(0, error instanceof Error ? error.message : String(error)));

/** Runs `load` when a dependency changes; `reload` runs it again. A stale answer never overwrites a newer one. */
export function useLoad<T>(load: () => Promise<T>, deps: unknown[]): Load<T> & { reload(): void } {
  const [state, setState] = useState<Load<T>>({ state: "loading" });
  const [round, setRound] = useState(0);
  useEffect(() => {
    let current = true;
    setState({ state: "loading" });
    load().then(
      (data) => current && setState({ state: "ready", data }),
      (error) => current && setState({ state: "error", error: asApiError(error) }),
    );
    return () => {
      current = false;
    };
  }, [...deps, round]);
  return { ...state, reload: useCallback(() => setRound((n) => n + 1), []) };
}

/** Loading, error (with a retry) and empty states around a screen's content. */
export function Loaded<T>(props: { load: Load<T> & { reload(): void }; isEmpty?: (data: T) => boolean; empty?: string; children: (data: T) => ComponentChildren }) {
  const { t } = useConsole();
  const { load } = props;
  if (load.state === "loading") {
    return (
      <p class="state" role="status">
        {t("state.loading")}
      </p>
    );
  }
  if (load.state === "error") {
    return (
      <div class="state error" role="alert">
        <p>{t("state.error", { message: load.error.message })}</p>
        {load.error.errors.length > 0 && (
          <ul>
            {load.error.errors.map((line) => (
              <li key={line}>{line}</li>
            ))}
          </ul>
        )}
        <button type="button" onClick={load.reload}>
          {t("state.retry")}
        </button>
      </div>
    );
  }
  if (props.isEmpty?.(load.data)) {
    return (
      <p class="state" role="status">
        {props.empty ?? t("state.empty")}
      </p>
    );
  }
  return <>{props.children(load.data)}</>;
}

/**
 * Runs `effect` when a dependency changes, but not on mount: a form that follows the address
 * (back, forward, a link) without overwriting what was typed while it first rendered.
 */
export function useOnChange(effect: () => void, deps: unknown[]) {
  const mounted = useRef(false);
  useEffect(() => {
    if (mounted.current) effect();
    mounted.current = true;
  }, deps);
}

/** An action's outcome under its button: a message while running, the API's error after a failure. */
export function useAction() {
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<ApiError | undefined>();
  const run = useCallback(async <T,>(action: () => Promise<T>): Promise<T | undefined> => {
    setBusy(true);
    setError(undefined);
    try {
      return await action();
    } catch (caught) {
      setError(asApiError(caught));
      return undefined;
    } finally {
      setBusy(false);
    }
  }, []);
  return { busy, error, run, clear: () => setError(undefined) };
}

export function ErrorText({ error }: { error?: ApiError }) {
  if (!error) return null;
  return (
    <div class="form-error" role="alert">
      <p>{error.message}</p>
      {error.errors.length > 0 && (
        <ul>
          {error.errors.map((line) => (
            <li key={line}>{line}</li>
          ))}
        </ul>
      )}
    </div>
  );
}

export { Field } from "../../../http/browser/kit";

export function Pager(props: { page: number; size: number; total: number; onPage(page: number): void; label: string }) {
  const { t, fmt } = useConsole();
  const pages = Math.max(1, Math.ceil(props.total / props.size));
  return (
    <nav class="pager" aria-label={props.label}>
      <button type="button" disabled={props.page <= 0} onClick={() => props.onPage(props.page - 1)}>
        {t("common.previous")}
      </button>
      <span>
        {t("common.page", { page: props.page + 1, pages })} · {t("common.total", { count: fmt.number(props.total) })}
      </span>
      <button type="button" disabled={props.page + 1 >= pages} onClick={() => props.onPage(props.page + 1)}>
        {t("common.next")}
      </button>
    </nav>
  );
}

export type Column = string | { label: ComponentChildren; key: string; numeric?: boolean; sort?: "ascending" | "descending" };

/** A data table: a caption for screen readers, one header row, the rows as children. */
export function Table(props: { caption: string; columns: Column[]; children: ComponentChildren }) {
  return (
    <table>
      <caption class="visually-hidden">{props.caption}</caption>
      <thead>
        <tr>
          {props.columns.map((column) =>
            typeof column === "string" ? (
              <th key={column} scope="col">
                {column}
              </th>
            ) : (
              <th key={column.key} scope="col" class={column.numeric ? "num" : undefined} aria-sort={column.sort}>
                {column.label}
              </th>
            ),
          )}
        </tr>
      </thead>
      <tbody>{props.children}</tbody>
    </table>
  );
}

/** A numeric column's header. */
export const numeric = (label: string): Column => ({ label, key: label, numeric: true });

/** A modal question, on the browser's own <dialog>: focus stays inside, Escape cancels. */
export function Confirm(props: { open: boolean; title: string; message: string; confirmLabel: string; onConfirm(): void; onCancel(): void }) {
  const { t } = useConsole();
  const ref = useRef<HTMLDialogElement>(null);
  const titleId = useId();
  useEffect(() => {
    const dialog = ref.current!;
    if (props.open && !dialog.open) dialog.showModal();
    if (!props.open && dialog.open) dialog.close();
  }, [props.open]);
  return (
    <dialog ref={ref} aria-labelledby={titleId} onCancel={props.onCancel} class="confirm">
      <h2 id={titleId}>{props.title}</h2>
      <p>{props.message}</p>
      <div class="buttons">
        <button type="button" onClick={props.onCancel} autofocus>
          {t("common.cancel")}
        </button>
        <button type="button" class="danger" onClick={props.onConfirm}>
          {props.confirmLabel}
        </button>
      </div>
    </dialog>
  );
}

/** The screen's heading, focused when the screen opens so keyboard and screen-reader users start there. */
export function ScreenTitle({ children }: { children: ComponentChildren }) {
  const ref = useRef<HTMLHeadingElement>(null);
  // Before paint, so focus is never seen anywhere else once the heading is there.
  useLayoutEffect(() => ref.current?.focus(), []);
  return (
    <h1 ref={ref} tabIndex={-1}>
      {children}
    </h1>
  );
}

/** The value of the input, select or textarea an event came from. */
export const inputValue = (event: { currentTarget: { value: string } }) => event.currentTarget.value;
