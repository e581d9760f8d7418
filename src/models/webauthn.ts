/**
 * What a browser's WebAuthn ceremonies send, as @simplewebauthn/browser answers them (base64url
 * fields): a registration's attestation (the mfa feature) and a sign-in's assertion (auth). One
 * credential envelope for both, each with its own response.
 */
import type { TObject } from "@sinclair/typebox";
import { t, type Static } from "elysia";

const Base64Url = (maxLength: number) => t.String({ minLength: 1, maxLength });

/** The credential around a ceremony's response: its ids, type and the browser's extras. */
const credential = <R extends TObject>(response: R, title: string) =>
  t.Object(
    {
      id: Base64Url(1024),
      rawId: Base64Url(1024),
      type: t.Literal("public-key"),
      response,
      clientExtensionResults: t.Optional(t.Record(t.String(), t.Unknown())),
      authenticatorAttachment: t.Optional(t.String({ maxLength: 32 })),
    },
    { title },
  );

/** A sign-in's assertion (startAuthentication). */
export const PasskeyAssertion = credential(
  t.Object({
    clientDataJSON: Base64Url(8192),
    authenticatorData: Base64Url(8192),
    signature: Base64Url(8192),
    userHandle: t.Optional(t.String({ maxLength: 1024 })),
  }),
  "PasskeyAssertion",
);
export type PasskeyAssertion = Static<typeof PasskeyAssertion>;

/** A registration's attestation (startRegistration); the browser's copies of the key and authenticator data are not needed: attestationObject holds both. */
export const PasskeyAttestation = credential(
  t.Object({
    clientDataJSON: Base64Url(8192),
    attestationObject: Base64Url(65536),
    transports: t.Optional(t.Array(t.String({ maxLength: 32 }), { maxItems: 10 })),
  }),
  "PasskeyAttestation",
);
export type PasskeyAttestation = Static<typeof PasskeyAttestation>;

/** WebAuthn request options (PublicKeyCredentialRequestOptionsJSON) for navigator.credentials.get. */
export const PasskeyRequestOptions = t.Object(
  {
    challenge: t.String(),
    rpId: t.Optional(t.String()),
    timeout: t.Optional(t.Integer()),
    userVerification: t.Optional(t.String()),
    allowCredentials: t.Optional(t.Array(t.Object({ id: t.String(), type: t.String(), transports: t.Optional(t.Array(t.String())) }))),
    extensions: t.Optional(t.Record(t.String(), t.Unknown())),
  },
  { title: "PasskeyRequestOptions" },
);
export type PasskeyRequestOptions = Static<typeof PasskeyRequestOptions>;
