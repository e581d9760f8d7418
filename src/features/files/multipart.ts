/**
 * Reads one file part of a multipart/form-data request as a stream, while the body arrives:
 * the bytes go straight to the handler (storage), never into memory as a whole.
 */
import { Readable } from "node:stream";
import type { ReadableStream as NodeWebStream } from "node:stream/web";
import busboy from "busboy";
import type { MessageKey } from "../../catalogue";
import { Violations } from "../../errors";

export interface FilePart {
  /** As the client sent it (UTF-8); never a path. */
  fileName: string;
  mimeType: string;
  stream: AsyncIterable<Uint8Array>;
}

const invalid = (key: MessageKey) => new Violations("body", [{ path: "file", key }]);

/**
 * Calls `handle` with the first part named `field` that carries a file, and returns its result once
 * the whole body is read. Other parts are skipped. Throws 400 violations for a body that is not
 * multipart, is malformed, or has no such part; whatever `handle` throws stops the upload.
 */
export function withFilePart<T>(request: Request, field: string, handle: (part: FilePart) => Promise<T>): Promise<T> {
  const type = request.headers.get("content-type") ?? "";
  if (!type.toLowerCase().startsWith("multipart/form-data") || !request.body) return Promise.reject(invalid("field.file.multipart"));
  let parser: busboy.Busboy;
  try {
    parser = busboy({
      headers: { "content-type": type },
      defParamCharset: "utf8",
      limits: { fields: 20, fieldSize: 64 * 1024, parts: 50, headerPairs: 20 },
    });
  } catch {
    return Promise.reject(invalid("field.file.multipart")); // no boundary
  }
  const body = Readable.fromWeb(request.body as NodeWebStream<Uint8Array>);

  return new Promise<T>((resolve, reject) => {
    let handled: Promise<T> | undefined;
    let part: Readable | undefined;
    let failed = false;
    const fail = (error: unknown) => {
      if (failed) return;
      failed = true;
      body.unpipe(parser);
      body.destroy();
      // The handler may be waiting on the part's next bytes, which will never come now: end its wait.
      part?.destroy(error instanceof Error ? error : new Error("upload failed"));
      // Answer only once the handler has cleaned up after itself (a temp file, an aborted upload).
      void (handled ?? Promise.resolve()).catch(() => {}).finally(() => reject(error));
    };
    parser.on("file", (name, stream, info) => {
      // An error busboy puts on a part (a cut-off body) must not go unheard: an 'error' with no
      // listener is an uncaught exception. The chosen part's handler may start reading only later
      // (after opening its target) and sees the error then; a skipped part is drained and forgotten.
      stream.on("error", () => {});
      if (name !== field || handled || failed) {
        stream.resume();
        return;
      }
      part = stream;
      handled = handle({ fileName: info.filename ?? "", mimeType: info.mimeType, stream });
      handled.catch((error) => {
        stream.destroy();
        fail(error);
      });
    });
    parser.on("error", () => fail(invalid("field.file.malformed")));
    parser.on("close", () => {
      if (!handled) return fail(invalid("field.file.required"));
      handled.then(resolve, fail);
    });
    body.on("error", () => fail(invalid("field.file.malformed")));
    // A client that goes away mid-upload leaves the body stream waiting forever (no error, no end):
    // without this the temp file and its handle would stay open until garbage collection.
    request.signal.addEventListener("abort", () => fail(invalid("field.file.malformed")), { once: true });
    body.pipe(parser);
  });
}
