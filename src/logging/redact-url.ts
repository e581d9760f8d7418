/**
 * A URL as logs may show it: userinfo (`//user:pass@`) and the values of the query parameters that
 * carry secrets (authToken, token, key, secret, password; any case) masked, the rest kept, so a
 * remote primary's auth token or a setup link's token never reaches a log line. Reads any URL as
 * text (a database URL, a request's), with no URL object: it must not fail on what it masks.
 */
const USERINFO = /^([A-Za-z][A-Za-z0-9+.-]*:\/\/)[^@/?#]*@/;
const SECRET_PARAMETER = /([?&](?:authToken|token|key|secret|password)=)[^&#]*/gi;

export const redactUrl = (url: string) => url.replace(USERINFO, "$1***@").replace(SECRET_PARAMETER, "$1***");
