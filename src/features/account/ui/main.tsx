/**
 * The account pages that need more than a form (account/page/index.ts renders their shell): the
 * first-run setup, the sign-in (/account), the security page and an app's sign-in and consent, picked by the shell's data-page. The language is the
 * shell's `<html lang>`, which the server chose from Accept-Language.
 */
import "./styles.css";
import { render } from "preact";
import { useMemo, useState } from "preact/hooks";
import { createApi, session, type TokenAnswer } from "./api";
import { type MessageKey, translator, type Lang } from "./i18n";
import { type Outcome, PageContext, type Page } from "./parts";
import { Authorize } from "./authorize";
import { Security } from "./security";
import { Setup } from "./setup";
import { SignIn } from "./sign-in";
import { takeFlowReturn } from "../../../http/browser/provider-flow";
import { FLOW_KEY, type FlowKind } from "./providers";

/** `landing`: /account, the sign-in page, which hands a signed-in user on to /account/security. */
function SecurityPage({ landing }: { landing: boolean }) {
  const [signedIn, setSignedIn] = useState(session.get());
  // A provider's answer in the fragment: taken off the address before anything else reads it.
  const back = useMemo(() => takeFlowReturn<FlowKind>(FLOW_KEY), []);
  // What the sign-in screen says about how the last session ended, if the server ended it.
  const [notice, setNotice] = useState<Outcome | undefined>();
  const page = usePageValue(() => {
    setSignedIn(undefined);
    setNotice({ kind: "error", message: page.t("signIn.expired") });
  });
  const signOut = async () => {
    await page.api.post("/api/auth/logout").catch(() => undefined);
    session.set(undefined);
    setNotice(undefined);
    setSignedIn(undefined);
  };
  // Removing a second factor ended every session of the user, this one too.
  const onEnded = (done: MessageKey) => {
    session.set(undefined);
    setNotice({ kind: "success", message: `${page.t(done)} ${page.t("signIn.allEnded")}` });
    setSignedIn(undefined);
  };
  const onSignedIn = (answer: TokenAnswer) => {
    const value = { token: answer.token, email: answer.user.email };
    session.set(value);
    setNotice(undefined);
    setSignedIn(value);
  };
  if (signedIn && landing) {
    location.replace(`${basePath}/account/security`);
    return null;
  }
  // A link's or a step-up's answer is the signed-in page's; any other, the sign-in's.
  const forSecurity = signedIn && back && back.kind !== "sign-in" ? back : undefined;
  return (
    <PageContext.Provider value={page}>
      {signedIn ? <Security email={signedIn.email} back={forSecurity} onSignOut={signOut} onEnded={onEnded} /> : <SignIn notice={notice} back={back} onSignedIn={onSignedIn} />}
    </PageContext.Provider>
  );
}

function SetupPage({ strict }: { strict: boolean }) {
  const page = usePageValue(() => undefined);
  return (
    <PageContext.Provider value={page}>
      <Setup strict={strict} />
    </PageContext.Provider>
  );
}

function AuthorizePage() {
  const page = usePageValue(() => undefined);
  // A provider's sign-in comes back here (its returnTo is this page, query and all).
  const back = useMemo(() => takeFlowReturn<FlowKind>(FLOW_KEY), []);
  return (
    <PageContext.Provider value={page}>
      <Authorize query={location.search.slice(1)} back={back} />
    </PageContext.Provider>
  );
}

const root = document.getElementById("app")!;
const basePath = root.dataset.basePath ?? "";
const lang: Lang = document.documentElement.lang === "zh-TW" ? "zh-TW" : "en";

function usePageValue(onUnauthorized: () => void): Page {
  return useMemo(() => ({ api: createApi(basePath, lang, onUnauthorized), t: translator(lang), lang, basePath, provider: root.dataset.provider === "on" }), []);
}

const which = root.dataset.page;
render(
  which === "setup" ? <SetupPage strict={root.dataset.policy === "strict"} /> : which === "authorize" ? <AuthorizePage /> : <SecurityPage landing={which === "sign-in"} />,
  root,
);
