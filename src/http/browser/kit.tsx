/** @jsxImportSource preact */
/**
 * What the service's browser pages (the admin console, the account pages) share: the API's error
 * as a value, a translator over a page's own texts, and a labelled field. Browser code (DOM,
 * Preact's JSX), type-checked through each page's ui/tsconfig.json.
 */
import type { ComponentChildren } from "preact";
import { useId } from "preact/hooks";

export type Lang = "en" | "zh-TW";

/** An answer that is not a success: its status, the envelope's message, errorCode and reasons. */
export class ApiError extends Error {
  constructor(
    readonly status: number,
    message: string,
    readonly code?: string,
    readonly errors: string[] = [],
  ) {
    super(message);
  }
}

/** A page's texts by language, `{name}` filled from params. */
export const translatorOf =
  <K extends string>(catalogues: Record<Lang, Record<K, string>>) =>
  (lang: Lang) =>
  (key: K, params: Record<string, string | number> = {}) =>
    catalogues[lang][key].replace(/\{(\w+)\}/g, (_, name: string) => String(params[name] ?? ""));

/** A labelled control; `children` receives the id to put on it (and the hint's id to describe it by). */
export function Field(props: { label: string; hint?: string; children: (id: string, describedBy?: string) => ComponentChildren }) {
  const id = useId();
  const hintId = props.hint ? `${id}-hint` : undefined;
  return (
    <div class="field">
      <label for={id}>{props.label}</label>
      {props.children(id, hintId)}
      {props.hint && (
        <p class="hint" id={hintId}>
          {props.hint}
        </p>
      )}
    </div>
  );
}
