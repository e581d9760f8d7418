/**
 * A streamed S3 upload with one part buffer: CreateMultipartUpload, then 5 MiB parts sent one by
 * one from a single reused buffer, then Complete (or Abort on any failure, so no object and no
 * orphaned parts remain). Bun's own S3 writer reads ahead, 40–70 MiB per upload measured; this
 * keeps an upload near one part. Requests are signed with AWS Signature V4.
 */
import { createHash, createHmac } from "node:crypto";

export interface S3Target {
  endpoint: string;
  region: string;
  bucket: string;
  accessKeyId: string;
  secretAccessKey: string;
  sessionToken?: string;
}

/** S3's minimum part size (every part but the last). */
export const PART_SIZE = 5 * 1024 * 1024;

const UNSIGNED = "UNSIGNED-PAYLOAD";
const hmac = (key: string | Buffer, text: string) => createHmac("sha256", key).update(text).digest();
const sha256Hex = (text: string) => createHash("sha256").update(text).digest("hex");
/** RFC 3986 encoding as SigV4 wants it: everything but unreserved characters. */
const encode = (text: string) => encodeURIComponent(text).replace(/[!'()*]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`);

/** Sends one signed request; `key` empty means the bucket itself. */
export async function s3Fetch(target: S3Target, method: string, key: string, query: Record<string, string> = {}, body?: Uint8Array | string) {
  const path = `/${encode(target.bucket)}${key ? `/${key.split("/").map(encode).join("/")}` : ""}`;
  const url = new URL(path, target.endpoint);
  const canonicalQuery = Object.keys(query)
    .sort()
    .map((name) => `${encode(name)}=${encode(query[name])}`)
    .join("&");
  // The machine's clock, not the app's: S3 refuses a signature dated more than 15 minutes from its own clock.
  const amzDate = new Date().toISOString().replace(/[-:]|\.\d{3}/g, "");
  const day = amzDate.slice(0, 8);
  const headers: Record<string, string> = { host: url.host, "x-amz-content-sha256": UNSIGNED, "x-amz-date": amzDate };
  if (target.sessionToken) headers["x-amz-security-token"] = target.sessionToken;
  const names = Object.keys(headers).sort();
  const signedHeaders = names.join(";");
  const canonical = [method, url.pathname, canonicalQuery, ...names.map((name) => `${name}:${headers[name]}`), "", signedHeaders, UNSIGNED].join("\n");
  const scope = `${day}/${target.region}/s3/aws4_request`;
  let signingKey = hmac(`AWS4${target.secretAccessKey}`, day);
  for (const part of [target.region, "s3", "aws4_request"]) signingKey = hmac(signingKey, part);
  const signature = createHmac("sha256", signingKey)
    .update(["AWS4-HMAC-SHA256", amzDate, scope, sha256Hex(canonical)].join("\n"))
    .digest("hex");
  headers.authorization = `AWS4-HMAC-SHA256 Credential=${target.accessKeyId}/${scope}, SignedHeaders=${signedHeaders}, Signature=${signature}`;
  const response = await fetch(`${url.origin}${url.pathname}${canonicalQuery ? `?${canonicalQuery}` : ""}`, { method, headers, body });
  if (!response.ok) throw new Error(`S3 ${method} ${target.bucket}/${key}: ${response.status} ${(await response.text()).slice(0, 300)}`);
  return response;
}

/** Uploads `source` to `key`; the object exists only if every chunk arrived and Complete succeeded. */
export async function multipartUpload(target: S3Target, key: string, source: AsyncIterable<Uint8Array>): Promise<void> {
  const created = await (await s3Fetch(target, "POST", key, { uploads: "" })).text();
  const uploadId = /<UploadId>([^<]+)<\/UploadId>/.exec(created)?.[1];
  if (!uploadId) throw new Error(`S3 CreateMultipartUpload ${key}: no UploadId`);
  const etags: string[] = [];
  const buffer = new Uint8Array(PART_SIZE);
  let filled = 0;
  const sendPart = async () => {
    const response = await s3Fetch(target, "PUT", key, { partNumber: String(etags.length + 1), uploadId }, buffer.subarray(0, filled));
    etags.push(response.headers.get("etag") ?? "");
    filled = 0;
  };
  try {
    for await (const chunk of source) {
      for (let offset = 0; offset < chunk.length; ) {
        const take = Math.min(PART_SIZE - filled, chunk.length - offset);
        buffer.set(chunk.subarray(offset, offset + take), filled);
        filled += take;
        offset += take;
        if (filled === PART_SIZE) await sendPart();
      }
    }
    if (filled > 0 || etags.length === 0) await sendPart();
    const parts = etags.map((etag, i) => `<Part><PartNumber>${i + 1}</PartNumber><ETag>${etag.replace(/&/g, "&amp;").replace(/</g, "&lt;")}</ETag></Part>`).join("");
    const completed = await s3Fetch(target, "POST", key, { uploadId }, `<CompleteMultipartUpload>${parts}</CompleteMultipartUpload>`);
    // S3 may answer 200 with an error document when Complete fails late.
    if ((await completed.text()).includes("<Error>")) throw new Error(`S3 CompleteMultipartUpload ${key} failed`);
  } catch (error) {
    await s3Fetch(target, "DELETE", key, { uploadId }).catch(() => {});
    throw error;
  }
}
