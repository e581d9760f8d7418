/**
 * A real SMTP server for the e-mail tests: Debian's python3-aiosmtpd on loopback, writing each
 * message into a maildir that the tests read back (parsed by mailparser). It can be stopped and
 * started again on the same port, to play an outage. Without aiosmtpd, `smtpUnavailable` says why.
 */
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { simpleParser, type ParsedMail } from "mailparser";
import { freePort } from "./server-process";
import { reaper } from "./support/reaper";

const PYTHON = "/usr/bin/python3";

/** Why the SMTP tests cannot run here, or undefined when they can. */
export function smtpUnavailable(): string | undefined {
  if (!existsSync(PYTHON)) return "python3 is not installed (Debian package python3-aiosmtpd)";
  const probe = Bun.spawnSync([PYTHON, "-c", "import aiosmtpd"], { stderr: "ignore" });
  return probe.exitCode === 0 ? undefined : "aiosmtpd is not installed (Debian package python3-aiosmtpd)";
}

export interface Mailbox {
  port: number;
  url: string;
  /** Every message received so far, in outbox order. */
  messages(): Promise<ParsedMail[]>;
  /** Polls until `count` messages to `to` have arrived (or 15 s), and returns them. */
  waitFor(to: string, count?: number): Promise<ParsedMail[]>;
  stop(): Promise<void>;
  start(): Promise<void>;
  close(): Promise<void>;
}

const accepts = (port: number) =>
  Bun.connect({ hostname: "127.0.0.1", port, socket: { data() {} } }).then(
    (socket) => {
      socket.end();
      return true;
    },
    () => false,
  );

export async function startMailbox(): Promise<Mailbox> {
  const dir = mkdtempSync(join(tmpdir(), "usersvc-smtp-"));
  const maildir = join(dir, "maildir");
  const port = freePort();
  let proc: ReturnType<typeof Bun.spawn> | undefined;
  const parsed = new Map<string, ParsedMail>();

  async function start() {
    proc = Bun.spawn([PYTHON, "-m", "aiosmtpd", "-n", "-l", `127.0.0.1:${port}`, "-c", "aiosmtpd.handlers.Mailbox", maildir], { stdout: "ignore", stderr: "ignore" });
    reaper.add(proc.pid);
    for (let i = 0; !(await accepts(port)); i++) {
      if (i > 150 || proc.exitCode !== null) throw new Error("aiosmtpd did not start");
      await Bun.sleep(20);
    }
  }
  async function stop() {
    proc?.kill("SIGTERM");
    await proc?.exited;
    if (proc) reaper.release(proc.pid);
    proc = undefined;
  }
  async function messages() {
    const folder = join(maildir, "new");
    const names = existsSync(folder) ? readdirSync(folder).sort() : [];
    for (const name of names) if (!parsed.has(name)) parsed.set(name, await simpleParser(readFileSync(join(folder, name))));
    // Maildir names do not sort by arrival (their microseconds are not zero-padded): order by outbox row.
    const row = (mail: ParsedMail) => Number(mail.headers.get("x-usersvc-outbox-id") ?? 0);
    return names.map((name) => parsed.get(name)!).sort((a, b) => row(a) - row(b));
  }
  const recipients = (mail: ParsedMail) => [mail.to ?? []].flat().flatMap((to) => to.value.map((v) => v.address));

  await start();
  return {
    port,
    url: `smtp://127.0.0.1:${port}`,
    messages,
    async waitFor(to, count = 1) {
      for (let i = 0; ; i++) {
        const found = (await messages()).filter((mail) => recipients(mail).includes(to));
        if (found.length >= count || i > 750) return found;
        await Bun.sleep(20);
      }
    },
    start,
    stop,
    async close() {
      await stop();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** The token in a mail's link (or code line). */
export function tokenOf(mail: ParsedMail): string {
  const match = /token=([A-Za-z0-9_-]{43})|: ([A-Za-z0-9_-]{43})$/m.exec(mail.text ?? "");
  if (!match) throw new Error(`no token in the mail "${mail.subject}"`);
  return match[1] ?? match[2];
}

/** The link in a mail's text. */
export function linkOf(mail: ParsedMail): string {
  const match = /(https?:\/\/\S+token=[A-Za-z0-9_-]+)/.exec(mail.text ?? "");
  if (!match) throw new Error(`no link in the mail "${mail.subject}"`);
  return match[1];
}
