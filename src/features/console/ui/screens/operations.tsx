/**
 * Operations: health components with their details, the version, active users, and request rate,
 * p99 latency and error rate charted from /actuator/prometheus, sampled every 5 s from the moment
 * the page opens, up to 15 minutes (the server keeps no history; Prometheus does).
 */
import uPlot from "uplot";
import { useEffect, useRef, useState } from "preact/hooks";
import type { Health } from "../api";
import { useConsole } from "../app-context";
import { ErrorText, Loaded, ScreenTitle, Table, useAction, useLoad } from "../components";
import { pointBetween, readScrape, type Point, type Scrape } from "../metrics";

export const SAMPLE_EVERY_MS = 5_000;
const KEEP = (15 * 60 * 1000) / SAMPLE_EVERY_MS;

export function Operations() {
  const { api, t } = useConsole();
  const health = useLoad(async () => (await (await api.send("GET", "/actuator/health", { allow: [503] })).json()) as Health, []);
  const version = useLoad(() => api.get<{ version: string; commit: string; runtime: string }>("/api/version"), []);
  const { points, activeUsers, error } = useSamples();

  return (
    <section>
      <ScreenTitle>{t("ops.title")}</ScreenTitle>
      <div class="panels">
        <div class="panel">
          <h2>{t("ops.health")}</h2>
          <Loaded load={health}>
            {(data) => (
              <>
                <p>
                  <span class={data.status === "UP" ? "badge ok" : "badge off"}>{data.status}</span>{" "}
                  <button type="button" onClick={health.reload}>
                    {t("common.refresh")}
                  </button>
                </p>
                <Table caption={t("ops.health")} columns={[t("ops.component"), t("common.status"), t("ops.details")]}>
                  {Object.entries(data.components ?? {}).map(([name, component]) => (
                    <tr key={name}>
                      <td>{name}</td>
                      <td>
                        <span class={component.status === "UP" ? "badge ok" : "badge off"}>{component.status}</span>
                      </td>
                      <td>
                        {component.details ? (
                          <dl class="details">
                            {Object.entries(component.details).map(([key, value]) => (
                              <div key={key}>
                                <dt>{key}</dt>
                                <dd>{typeof value === "object" ? JSON.stringify(value) : String(value)}</dd>
                              </div>
                            ))}
                          </dl>
                        ) : (
                          t("common.none")
                        )}
                      </td>
                    </tr>
                  ))}
                </Table>
              </>
            )}
          </Loaded>
        </div>
        <div class="panel">
          <h2>{t("ops.activeUsers")}</h2>
          <p class="big" data-testid="active-users">
            {activeUsers ?? t("common.none")}
          </p>
          <h2>{t("ops.version")}</h2>
          <Loaded load={version}>
            {(v) => (
              <p>
                {v.version} ({v.commit}) · {v.runtime}
              </p>
            )}
          </Loaded>
        </div>
      </div>
      <h2>{t("ops.charts")}</h2>
      <ErrorText error={error} />
      {points.length === 0 && !error && (
        <p class="state" role="status">
          {t("ops.waiting")}
        </p>
      )}
      <div class="charts">
        <Chart title={t("ops.rate")} points={points} value={(p) => p.rate} />
        <Chart title={t("ops.p99")} points={points} value={(p) => p.p99} />
        <Chart title={t("ops.errors")} points={points} value={(p) => p.errorRate} />
      </div>
    </section>
  );
}

/** Scrapes the metrics now and every SAMPLE_EVERY_MS while the screen is open; keeps the last 15 minutes of points. */
function useSamples() {
  const { api } = useConsole();
  const [points, setPoints] = useState<Point[]>([]);
  const [activeUsers, setActiveUsers] = useState<number | undefined>();
  const sampling = useAction();
  useEffect(() => {
    let last: Scrape | undefined;
    const sample = async () => {
      const text = await sampling.run(async () => (await api.send("GET", "/actuator/prometheus", { headers: { accept: "text/plain" } })).text());
      if (text === undefined) return;
      const scrape = readScrape(text, Date.now());
      setActiveUsers(scrape.activeUsers);
      const point = last && pointBetween(last, scrape);
      last = scrape;
      if (point) setPoints((all) => [...all, point].slice(-KEEP));
    };
    sample();
    const timer = setInterval(sample, SAMPLE_EVERY_MS);
    return () => clearInterval(timer);
  }, []);
  return { points, activeUsers, error: sampling.error };
}

function Chart({ title, points, value }: { title: string; points: Point[]; value(point: Point): number | null }) {
  const { t } = useConsole();
  const box = useRef<HTMLDivElement>(null);
  const plot = useRef<uPlot | undefined>(undefined);
  const data: uPlot.AlignedData = [points.map((p) => p.at / 1000), points.map(value)];
  useEffect(() => {
    plot.current = new uPlot(
      {
        width: Math.max(280, box.current!.clientWidth),
        height: 180,
        legend: { show: false },
        scales: { y: { range: (_u, min, max) => [0, Math.max(max ?? 0, min ?? 0, 1) * 1.1] } },
        series: [{}, { label: title, stroke: "#1a5fb4", width: 2, fill: "rgba(26,95,180,0.08)", points: { show: true, size: 4 } }],
        axes: [{}, { size: 60 }],
      },
      data,
      box.current!,
    );
    return () => plot.current?.destroy();
  }, []);
  useEffect(() => {
    plot.current?.setData(data);
    // At least a minute wide: with one or two samples uPlot would spread the time axis over years.
    const times = data[0];
    if (times.length > 0) plot.current?.setScale("x", { min: times[0], max: Math.max(times[times.length - 1], times[0] + 60) });
  }, [points]);
  const latest = points.at(-1);
  const shown = latest ? value(latest) : null;
  return (
    <figure class="chart" data-points={points.length}>
      <figcaption>
        {title}: <strong>{shown === null ? t("common.none") : shown.toFixed(shown < 10 ? 2 : 0)}</strong> <span class="hint">({t("ops.samples", { count: points.length })})</span>
      </figcaption>
      <div ref={box} role="img" aria-label={title} />
    </figure>
  );
}
