/**
 * The admin console in the browser: sign-in, then one screen per part of the API, chosen by the
 * address after "#". Everything it shows comes from the public API with the ADMIN's token.
 */
import "uplot/dist/uPlot.min.css";
import "./styles.css";
import { render, type ComponentType } from "preact";
import { useMemo, useState } from "preact/hooks";
import { createApi, type Session } from "./api";
import { ConsoleContext, useConsole, useRoute, type Console } from "./app-context";
import { formatters, pickLanguage, translator, type MessageKey } from "./i18n";
import { FLOW_KEY, SignIn } from "./screens/sign-in";
import { type FlowReturn, takeFlowReturn } from "../../../http/browser/provider-flow";
import { Users } from "./screens/users";
import { UserDetail } from "./screens/user-detail";
import { Departments } from "./screens/departments";
import { Products } from "./screens/products";
import { Orders } from "./screens/orders";
import { Files } from "./screens/files";
import { Audit } from "./screens/audit";
import { Backups } from "./screens/backups";
import { Operations } from "./screens/operations";
import { Clients } from "./screens/clients";

const SCREENS: [path: string, label: MessageKey, screen: ComponentType<{ id?: string }>][] = [
  ["/users", "nav.users", Users],
  ["/departments", "nav.departments", Departments],
  ["/products", "nav.products", Products],
  ["/orders", "nav.orders", Orders],
  ["/files", "nav.files", Files],
  ["/audit", "nav.audit", Audit],
  ["/backups", "nav.backups", Backups],
  ["/clients", "nav.clients", Clients],
  ["/operations", "nav.operations", Operations],
];

function App({ basePath, back }: { basePath: string; back?: FlowReturn }) {
  const lang = pickLanguage(navigator.languages?.length ? navigator.languages : [navigator.language]);
  const [session, setSession] = useState<Session | undefined>();
  const [expired, setExpired] = useState(false);
  const [announcement, setAnnouncement] = useState("");
  const api = useMemo(
    () =>
      createApi(basePath, lang, () => {
        setSession(undefined);
        setExpired(true);
      }),
    [],
  );
  const context = useMemo<Console>(() => ({ api, lang, t: translator(lang), fmt: formatters(lang), announce: setAnnouncement }), []);
  const current = session ?? api.session.get();
  document.documentElement.lang = lang;
  document.title = context.t("app.title");

  return (
    <ConsoleContext.Provider value={context}>
      {current ? (
        <Shell
          email={current.email}
          onSignOut={async () => {
            // Logout revokes the token on the server too, so a copy of it is worthless.
            await api.post("/api/auth/logout").catch(() => undefined);
            api.session.set(undefined);
            setSession(undefined);
            setExpired(false);
          }}
        />
      ) : (
        <SignIn
          expired={expired}
          back={back}
          basePath={basePath}
          onSignedIn={(signedIn) => {
            api.session.set(signedIn);
            setSession(signedIn);
            setExpired(false);
          }}
        />
      )}
      <div class="visually-hidden" role="status" aria-live="polite">
        {announcement}
      </div>
    </ConsoleContext.Provider>
  );
}

function Shell({ email, onSignOut }: { email: string; onSignOut(): void }) {
  const { t } = useConsole();
  const { path } = useRoute();
  const [section, id] = path.split("/").filter(Boolean);
  const match = SCREENS.find(([screenPath]) => screenPath === `/${section}`) ?? SCREENS[0];
  const Screen = section === "users" && id ? UserDetail : match[2];
  return (
    <>
      {/* A button, not a link: "#main" would be read as a route by the hash router. */}
      <button type="button" class="skip" onClick={() => document.getElementById("main")?.focus()}>
        {t("app.skip")}
      </button>
      <header class="top">
        <span class="brand">{t("app.title")}</span>
        <span class="who">{t("nav.signedInAs", { email })}</span>
        <button type="button" onClick={onSignOut}>
          {t("nav.signOut")}
        </button>
      </header>
      <div class="frame">
        <nav class="side" aria-label={t("nav.label")}>
          <ul>
            {SCREENS.map(([screenPath, label]) => (
              <li key={screenPath}>
                <a href={`#${screenPath}`} aria-current={match[0] === screenPath ? "page" : undefined}>
                  {t(label)}
                </a>
              </li>
            ))}
          </ul>
        </nav>
        <main id="main" tabIndex={-1}>
          <Screen key={path} id={id} />
        </main>
      </div>
    </>
  );
}

const root = document.getElementById("app")!;
// A provider's answer (#code=… or #error=…) is taken off the address before the hash router reads it as a screen.
const back = takeFlowReturn(FLOW_KEY);
render(<App basePath={root.dataset.basePath ?? ""} back={back} />, root);
