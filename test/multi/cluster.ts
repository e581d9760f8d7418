/**
 * Several instances of the compiled binary on one primary, behind a real load balancer: the kit of
 * the multi-instance suite (npm run test:multi). It starts
 *
 * - the primary: sqld over HTTP (test/support/sqld.ts) with JWT auth on, on its own folder and
 *   port, so it can be killed and started again where it was;
 * - three instances of dist/usersvc (`mode`: each a remote client of the primary, or an embedded
 *   replica of it with its copy in its own folder), each with its own data folder and log file (LOG_LEVEL=info:
 *   one line per request with its X-Request-Id), TRUST_PROXY=1, their webhooks to one receiver at
 *   a path of their own and their mail from a sender name of their own (so a delivery names its
 *   instance), to one receiver and one real SMTP mailbox;
 * - Debian's nginx as a round-robin load balancer on loopback (its own temp config, pid, logs),
 *   adding `X-Upstream: <the instance's address>` to every answer, so each answer names its instance;
 * - Ceph RGW for files when it can start (test/s3-server.ts), else each instance keeps files in its folder;
 * - an OTLP receiver (test/support/otlp-receiver.ts) every instance sends its spans to.
 */
import { createHash } from "node:crypto";
import { appendFileSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createClient, type Client } from "@libsql/client";
import { Webhook } from "standardwebhooks";
import { ensureBinary, freePort, untilAnswering } from "../resilience/support";
import { createBucket, S3_TEST_KEYS, startS3Server, type S3Server } from "../s3-server";
import { smtpUnavailable, startMailbox, type Mailbox } from "../smtp-server";
import { startSqld } from "../support/sqld";
import { startOtlpReceiver } from "../support/otlp-receiver";
import { reaper } from "../support/reaper";

export const ADMIN = { email: "admin@multi.example.com", password: "Multi-Admin-1!" };
export const WEBHOOK_SECRET = `whsec_${Buffer.from("multi-instance-webhook-secret-32b").toString("base64")}`;
/**
 * The production default. A killed primary's 503s come at once (refused connections) whatever it
 * is; but a round trip slower than this counts as a lost primary (src/db/libsql.ts), and on this
 * loaded 2-core machine one Hrana round trip took over 2 s (load average 28).
 */
export const BUSY_TIMEOUT_MS = 5000;
/** The instances' DATABASE_SYNC_INTERVAL in replica mode (the production default, stated). */
export const SYNC_INTERVAL_MS = 1000;
/**
 * How the instances reach the primary: `remote`, every read and write a round trip to it
 * (DATABASE_URL=<sqld>); `replica`, each an embedded replica with its copy in its own folder
 * (DATABASE_URL=file:…, DATABASE_SYNC_URL=<sqld>), the edge deployment of docs/edge.md.
 */
export type Mode = "remote" | "replica";
const JWT_SECRET = "multi-instance-secret-".padEnd(80, "m");
/** One key for every instance, as README's configuration table asks (each would generate its own into its data folder). */
const DATA_ENCRYPTION_KEY = Buffer.from("multi-instance-data-key-".padEnd(32, "k")).toString("base64");

/** Why the suite cannot run here (nginx missing), or undefined. */
export function clusterUnavailable(): string | undefined {
  if (!existsSync("/usr/sbin/nginx") && !Bun.which("nginx")) return "nginx is not installed (apt-get install nginx)";
  return undefined;
}

export interface Answer {
  status: number;
  headers: Headers;
  // biome-ignore lint/suspicious/noExplicitAny: a JSON answer of any route
  body: any;
  text: string;
  /** i1, i2 or i3: the instance that answered (nginx's X-Upstream, or the one called directly). */
  instance: string;
  requestId: string;
  ms: number;
}

export interface CallOptions {
  token?: string;
  body?: unknown;
  form?: FormData;
  headers?: Record<string, string>;
}

export interface Instance {
  name: string;
  port: number;
  url: string;
  /** Every log line this instance wrote, over all its starts. */
  logLines(): Record<string, unknown>[];
  running(): boolean;
  start(): Promise<void>;
  kill(): Promise<void>;
  stop(): Promise<void>;
}

export interface Receipt {
  /** The instance whose webhook URL it came to. */
  sender: string;
  webhookId: string;
  outboxId: number;
  kind: string;
  signatureValid: boolean;
  /** Whether the receiver answered it (a held one never was). */
  answered: boolean;
  /** The W3C trace context it carried (the delivery's span). */
  traceparent: string;
}

export interface WebhookReceiver {
  url: string;
  receipts: Receipt[];
  /** Deliveries from this instance are held unanswered (a slow receiver) until `release`. */
  hold(instance: string | undefined): void;
  release(): void;
  stop(): void;
}

function startWebhookReceiver(): WebhookReceiver {
  const receipts: Receipt[] = [];
  const verifier = new Webhook(WEBHOOK_SECRET);
  let held: string | undefined;
  const waiting: (() => void)[] = [];
  const server = Bun.serve({
    port: 0,
    hostname: "127.0.0.1",
    idleTimeout: 0,
    async fetch(request) {
      const sender = new URL(request.url).pathname.split("/").pop() ?? "";
      const text = await request.text();
      const headers = Object.fromEntries(request.headers);
      let signatureValid = true;
      try {
        verifier.verify(text, headers);
      } catch {
        signatureValid = false;
      }
      const body = JSON.parse(text) as { id: number; kind: string };
      const receipt: Receipt = {
        sender,
        webhookId: headers["webhook-id"] ?? "",
        outboxId: body.id,
        kind: body.kind,
        signatureValid,
        answered: false,
        traceparent: headers.traceparent ?? "",
      };
      receipts.push(receipt);
      if (held === sender) await new Promise<void>((resolve) => waiting.push(resolve));
      receipt.answered = true;
      return new Response(null, { status: 204 });
    },
  });
  const release = () => {
    for (const resolve of waiting.splice(0)) resolve();
  };
  return {
    url: `http://127.0.0.1:${server.port}`,
    receipts,
    hold: (instance) => {
      held = instance;
    },
    release,
    stop: () => {
      release();
      server.stop(true);
    },
  };
}

export interface Nginx {
  url: string;
  port: number;
  stop(): Promise<void>;
}

/** Debian's nginx on loopback, round robin over `upstreams` (ports on 127.0.0.1); also bench/multi.ts's balancer. */
export async function startNginx(dir: string, upstreams: number[]): Promise<Nginx> {
  const port = freePort();
  const temp = (name: string) => {
    mkdirSync(join(dir, name), { recursive: true });
    return join(dir, name);
  };
  // One process (master_process off), in the foreground, everything under `dir`: it needs no
  // system path, and is stopped by its own pid.
  const conf = `daemon off;
master_process off;
worker_processes 1;
pid ${dir}/nginx.pid;
error_log ${dir}/error.log warn;
events { worker_connections 1024; }
http {
  log_format upstream '$remote_addr "$request" $status $upstream_addr $sent_http_x_request_id';
  access_log ${dir}/access.log upstream;
  client_body_temp_path ${temp("client_body")};
  proxy_temp_path ${temp("proxy")};
  fastcgi_temp_path ${temp("fastcgi")};
  uwsgi_temp_path ${temp("uwsgi")};
  scgi_temp_path ${temp("scgi")};
  client_max_body_size 64m;
  upstream usersvc {
${upstreams.map((p) => `    server 127.0.0.1:${p};`).join("\n")}
    keepalive 16;
  }
  server {
    listen 127.0.0.1:${port};
    location / {
      proxy_pass http://usersvc;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_set_header Host $host;
      proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;
      proxy_set_header X-Forwarded-Proto $scheme;
      proxy_request_buffering off;
      proxy_buffering off;
      proxy_read_timeout 60s;
      add_header X-Upstream $upstream_addr always;
    }
  }
}
`;
  writeFileSync(join(dir, "nginx.conf"), conf);
  const proc = Bun.spawn([Bun.which("nginx") ?? "/usr/sbin/nginx", "-p", dir, "-c", join(dir, "nginx.conf"), "-e", join(dir, "error.log")], { stdout: "ignore", stderr: "pipe" });
  reaper.add(proc.pid);
  const url = `http://127.0.0.1:${port}`;
  await untilAnswering(`${url}/actuator/health/liveness`, proc, "nginx", 200, join(dir, "error.log"));
  return {
    url,
    port,
    async stop() {
      proc.kill("SIGTERM");
      await proc.exited;
      reaper.release(proc.pid);
    },
  };
}

export interface Cluster {
  mode: Mode;
  /** nginx's address: every journey's requests go here unless they name an instance. */
  url: string;
  instances: Instance[];
  /** A client of the primary for the checks (the truth, not an instance's view); a kill -9, and a restart on its port and file. */
  primary: { client(): Client; kill(): Promise<void>; restart(): Promise<void> };
  webhooks: WebhookReceiver;
  /** Where the instances send their spans (OTEL_EXPORTER_OTLP_ENDPOINT). */
  traces: ReturnType<typeof startOtlpReceiver>;
  mailbox?: Mailbox;
  /** Why there is no mailbox / no S3, when there is none. */
  mailboxMissing?: string;
  s3Missing?: string;
  /** Every answer so far, in order, with its instance (for the report and the log check). */
  answers: (Answer & { label: string })[];
  call(label: string, method: string, path: string, options?: CallOptions & { via?: Instance }): Promise<Answer>;
  /** Through nginx from another loopback source address (curl --interface): another client address. */
  callFrom(label: string, source: string, method: string, path: string, body: unknown): Promise<Answer>;
  /**
   * Back to how the suite found the cluster, whatever a journey left: webhooks answered again,
   * the primary up, every instance running and ready. After each journey, so one failure never
   * becomes the next journey's.
   */
  heal(): Promise<void>;
  stop(): Promise<void>;
}

const readLines = (files: string[]) =>
  files.flatMap((file) =>
    existsSync(file)
      ? readFileSync(file, "utf8")
          .split("\n")
          .filter((line) => line.startsWith("{"))
          .map((line) => JSON.parse(line) as Record<string, unknown>)
      : [],
  );

export async function startCluster(mode: Mode): Promise<Cluster> {
  const root = mkdtempSync(join(tmpdir(), "usersvc-multi-"));
  reaper.addDir(root);
  const binary = ensureBinary();

  const [s3, mailboxMissing] = await Promise.all([startS3Server(), Promise.resolve(smtpUnavailable())]);
  const s3Server = "endpoint" in s3 ? (s3 as S3Server) : undefined;
  const bucket = `multi-${crypto.randomUUID().slice(0, 8)}`;
  if (s3Server) await createBucket(s3Server.endpoint, bucket);
  const mailbox = mailboxMissing ? undefined : await startMailbox();
  const webhooks = startWebhookReceiver();
  const traces = startOtlpReceiver();

  const sqld = await startSqld({ dir: join(root, "primary") });
  let primaryUp = true;

  const instances: Instance[] = ["i1", "i2", "i3"].map((name) => {
    const port = freePort();
    const dir = join(root, name);
    mkdirSync(dir, { recursive: true });
    const logs: string[] = [];
    let proc: Bun.Subprocess | undefined;
    const env: Record<string, string> = {
      PATH: process.env.PATH ?? "/usr/bin:/bin",
      DATA_DIR: dir,
      ...(mode === "replica"
        ? { DATABASE_URL: `file:${join(dir, "usersvc.db")}`, DATABASE_SYNC_URL: sqld.url, DATABASE_SYNC_INTERVAL: `${SYNC_INTERVAL_MS}ms` }
        : { DATABASE_URL: sqld.url }),
      DATABASE_AUTH_TOKEN: sqld.authToken,
      DATABASE_BUSY_TIMEOUT_MS: String(BUSY_TIMEOUT_MS),
      JWT_SECRET,
      DATA_ENCRYPTION_KEY,
      PORT: String(port),
      HOST: "127.0.0.1",
      LOG_LEVEL: "info",
      TRUST_PROXY: "1",
      ADMIN_EMAIL: ADMIN.email,
      ADMIN_PASSWORD: ADMIN.password,
      LOGIN_MAX_FAILURES_PER_IP: "8",
      NOTIFY_WEBHOOK_URL: `${webhooks.url}/hook/${name}`,
      NOTIFY_WEBHOOK_SECRET: WEBHOOK_SECRET,
      OTEL_EXPORTER_OTLP_ENDPOINT: traces.endpoint,
      ...(mailbox ? { SMTP_URL: mailbox.url, MAIL_FROM: `usersvc ${name} <no-reply@multi.example.com>` } : {}),
      ...(s3Server
        ? {
            FILE_STORAGE: `s3://${bucket}/files`,
            S3_ENDPOINT: s3Server.endpoint,
            S3_ACCESS_KEY_ID: S3_TEST_KEYS.accessKeyId,
            S3_SECRET_ACCESS_KEY: S3_TEST_KEYS.secretAccessKey,
            S3_REGION: S3_TEST_KEYS.region,
          }
        : {}),
    };
    const url = `http://127.0.0.1:${port}`;
    return {
      name,
      port,
      url,
      logLines: () => readLines(logs),
      running: () => proc !== undefined && proc.exitCode === null && proc.signalCode === null,
      async start() {
        const log = join(root, `${name}-${logs.length + 1}.log`);
        logs.push(log);
        writeFileSync(log, "");
        proc = Bun.spawn([binary, "serve"], { cwd: dir, env, stdout: Bun.file(log), stderr: "pipe" });
        reaper.add(proc.pid);
        await untilAnswering(`${url}/actuator/health/readiness`, proc, name, 600, log);
      },
      async kill() {
        proc?.kill("SIGKILL");
        await proc?.exited;
        if (proc) reaper.release(proc.pid);
      },
      async stop() {
        proc?.kill("SIGTERM");
        await proc?.exited;
        if (proc) reaper.release(proc.pid);
      },
    };
  });
  // One after another: the first migrates the primary and creates the ADMIN, the others find both.
  for (const instance of instances) await instance.start();
  const nginx = await startNginx(
    join(root, "nginx"),
    instances.map((i) => i.port),
  );
  const byAddress = new Map(instances.map((i) => [`127.0.0.1:${i.port}`, i.name]));
  /** nginx names the upstream that answered (the last one, if it had to try another). */
  const instanceOf = (res: Response) => byAddress.get((res.headers.get("x-upstream") ?? "").split(",").pop()?.trim() ?? "") ?? "nginx";

  const answers: Cluster["answers"] = [];
  async function call(label: string, method: string, path: string, options: CallOptions & { via?: Instance } = {}): Promise<Answer> {
    const headers: Record<string, string> = { ...options.headers };
    if (options.token) headers.authorization = `Bearer ${options.token}`;
    if (options.body !== undefined) headers["content-type"] = "application/json";
    const started = performance.now();
    const res = await fetch(`${options.via?.url ?? nginx.url}${path}`, {
      method,
      headers,
      body: options.form ?? (options.body === undefined ? undefined : JSON.stringify(options.body)),
    });
    const text = await res.text();
    const answer: Answer = {
      status: res.status,
      headers: res.headers,
      body: parse(text),
      text,
      instance: options.via?.name ?? instanceOf(res),
      requestId: res.headers.get("x-request-id") ?? "",
      ms: performance.now() - started,
    };
    answers.push({ ...answer, label });
    return answer;
  }

  async function callFrom(label: string, source: string, method: string, path: string, body: unknown): Promise<Answer> {
    const started = performance.now();
    const curl = Bun.spawn(
      ["curl", "-sS", "-i", "--interface", source, "-X", method, "-H", "content-type: application/json", "--data-binary", JSON.stringify(body), `${nginx.url}${path}`],
      { stdout: "pipe", stderr: "pipe" },
    );
    const out = await new Response(curl.stdout).text();
    if ((await curl.exited) !== 0) throw new Error(`curl from ${source}: ${await new Response(curl.stderr).text()}`);
    const [head, ...rest] = out.split("\r\n\r\n");
    const [statusLine, ...headerLines] = head.split("\r\n");
    const headers = new Headers(headerLines.map((line) => [line.slice(0, line.indexOf(":")), line.slice(line.indexOf(":") + 1).trim()] as [string, string]));
    const text = rest.join("\r\n\r\n");
    const answer: Answer = {
      status: Number(statusLine.split(" ")[1]),
      headers,
      body: parse(text),
      text,
      instance: byAddress.get((headers.get("x-upstream") ?? "").split(",").pop()?.trim() ?? "") ?? "nginx",
      requestId: headers.get("x-request-id") ?? "",
      ms: performance.now() - started,
    };
    answers.push({ ...answer, label: `${label} (from ${source})` });
    return answer;
  }

  let primaryClient: Client | undefined;
  const primary: Cluster["primary"] = {
    client: () => (primaryClient ??= createClient({ url: sqld.url, authToken: sqld.authToken })),
    async kill() {
      await sqld.kill();
      primaryUp = false;
    },
    async restart() {
      await sqld.restart();
      primaryUp = true;
    },
  };
  return {
    mode,
    url: nginx.url,
    instances,
    primary,
    async heal() {
      webhooks.hold(undefined);
      webhooks.release();
      if (!primaryUp) await primary.restart();
      for (const instance of instances) {
        if (!instance.running()) await instance.start();
        else await eventually(30_000, `${instance.name} ready`, async () => ((await fetch(`${instance.url}/actuator/health/readiness`)).ok ? true : undefined));
      }
    },
    webhooks,
    traces,
    mailbox,
    mailboxMissing,
    s3Missing: s3Server ? undefined : (s3 as { reason: string }).reason,
    answers,
    call,
    callFrom,
    async stop() {
      primaryClient?.close();
      await nginx.stop();
      await Promise.all(instances.map((i) => i.stop()));
      await sqld.stop();
      webhooks.stop();
      traces.stop();
      await mailbox?.close();
      await s3Server?.stop();
      rmSync(root, { recursive: true, force: true });
      reaper.releaseDir(root);
    },
  };
}

function parse(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
}

export const sha256 = (bytes: Uint8Array | ArrayBuffer) => createHash("sha256").update(new Uint8Array(bytes)).digest("hex");

/** Appends the journey table to a file when MULTI_REPORT names one (CI keeps it as an artifact). */
export function writeReport(lines: string[]) {
  console.log(lines.join("\n"));
  const file = process.env.MULTI_REPORT;
  if (file) appendFileSync(file, `${lines.join("\n")}\n`);
}

/** Polls `check` until it returns a value (not undefined) or `ms` pass. */
export async function eventually<T>(ms: number, what: string, check: () => Promise<T | undefined>): Promise<T> {
  const until = performance.now() + ms;
  for (;;) {
    const value = await check();
    if (value !== undefined) return value;
    if (performance.now() > until) throw new Error(`not within ${ms} ms: ${what}`);
    await Bun.sleep(250);
  }
}
