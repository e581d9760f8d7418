/**
 * An unpaged list's answer from its chunks (each read on its own, see store/user-search.ts
 * userChunks): the array itself when the list fits one chunk, the answer small lists have always
 * had (Content-Length included); else the same JSON text, streamed. The stream pulls: the next
 * chunk is read only when the client has taken the last, so the server holds about one chunk
 * per answer however long the list and however slow the client.
 */
import { streamedJson } from "./compression";

const utf8 = new TextEncoder();

export async function listAnswer<T>(chunks: AsyncGenerator<T[]>): Promise<T[] | Response> {
  const first = await chunks.next();
  if (first.done) return [];
  const second = await chunks.next();
  if (second.done) return first.value;
  const read = [first.value, second.value];
  let opened = false;
  const body = new ReadableStream<Uint8Array>(
    {
      async pull(controller) {
        const chunk = read.shift() ?? (await chunks.next()).value;
        if (!chunk) {
          controller.enqueue(utf8.encode("]"));
          controller.close();
          return;
        }
        // The array's own text without its brackets: the answer is JSON.stringify(list), byte for byte.
        controller.enqueue(utf8.encode((opened ? "," : "[") + JSON.stringify(chunk).slice(1, -1)));
        opened = true;
      },
      async cancel() {
        await chunks.return(undefined);
      },
    },
    { highWaterMark: 0 },
  );
  return streamedJson(body);
}
