/**
 * What every completed sign-in writes beside its session, whichever way it completed (a password,
 * or the second factor's step after it): the deviceToken its answer carries, and the device it came
 * from noted as known, with NEW_SIGN_IN to the owner when the account did not know that device label
 * and client network yet (docs/security.md, "Throttling and lockout"). Statements only, for the sign-in's own
 * unit: no round trip of their own.
 */
import type { Db } from "../db/database";
import { clientNetwork } from "../http/client-network";
import { knownDeviceRows, newDeviceTokenRows } from "../store/devices";
import { randomToken } from "../store/sessions";

export interface CompletedSignIn {
  userId: number;
  email: string;
  /** The first sign-in after registration (no lastLogin yet): it mails nothing. */
  firstSignIn: boolean;
  address: string;
  /** The device label of the session ("Chrome 142 on Linux"). */
  device: string | null;
  /** The account's deviceToken the sign-in presented, when still good (CheckedPassword.device): answered again. */
  deviceToken?: string;
}

/** The deviceToken to answer (the presented one, or a new one: 32 random bytes, base64url) and the statements that record the sign-in's device. */
export function completeSignIn(signIn: CompletedSignIn, now: Date) {
  const presented = signIn.deviceToken;
  const deviceToken = presented ?? randomToken(32);
  const device = { userId: signIn.userId, email: signIn.email, device: signIn.device, address: signIn.address, network: clientNetwork(signIn.address) };
  return {
    deviceToken,
    rows: (tx: Db) => [...(presented ? [] : newDeviceTokenRows(tx, deviceToken, signIn.userId, now)), ...knownDeviceRows(tx, device, now, signIn.firstSignIn)],
  };
}
