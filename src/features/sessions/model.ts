/** What a session list shows of a signed-in device: never a token or a token's hash. */
import { t, type Static } from "elysia";
import { UserIdParams } from "../../models/user";

export const Session = t.Object(
  {
    id: t.String({ description: "The token's sid" }),
    device: t.Union([t.String(), t.Null()], { examples: ["Chrome 142 on Linux"] }),
    userAgent: t.Union([t.String(), t.Null()]),
    address: t.String(),
    amr: t.Array(t.String(), { examples: [["pwd"]] }),
    createdAt: t.String({ format: "date-time" }),
    lastSeenAt: t.String({ format: "date-time" }),
    expiresAt: t.String({ format: "date-time" }),
    current: t.Boolean(),
  },
  { title: "Session" },
);
export type Session = Static<typeof Session>;

const SessionId = t.String({ minLength: 1, maxLength: 64 });
export const SessionIdParams = t.Object({ id: SessionId });
export const UserSessionParams = t.Object({ ...UserIdParams.properties, sid: SessionId });
