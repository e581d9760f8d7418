/**
 * Keeps users_name_fts (the trigram index every name search reads, drizzle/0005) in one piece.
 *
 * Each users write adds a segment to the FTS5 index, and FTS5's own automerge leaves a few per
 * level: 10 segments for 10,000 users written one at a time. A search seeks its term in every
 * segment and merges what they give: a 10-user page cost 150 µs on such an index and 105 µs on
 * one segment (in-process, app.handle, main-thread CPU). FTS5's 'merge' command with a negative
 * page count merges every segment, whatever its level, into one.
 *
 * The primary runs one bounded step every MERGE_EVERY_MS: at most MERGE_PAGES pages of the index
 * rewritten (a few milliseconds of the write lock; a bulk-loaded 100,000-user index is whole again
 * after about 8 steps). On an index in one piece a step writes nothing.
 *
 * Every instance on a shared primary runs its own timer: their steps take turns on the write lock,
 * and a step that finds the index whole does nothing. search_index_segments_merged_total counts
 * each instance's work, so the instances' sum is the work done, once.
 */
import type { Logger } from "pino";
import type { Database } from "../../db/database";
import { isBusy } from "../../db/errors";
import type { Metrics } from "../../metrics";
import { mergeNameIndexSegments } from "../../store/user-search";

export const MERGE_PAGES = 128;
export const MERGE_EVERY_MS = 10_000;

/** One step: up to MERGE_PAGES pages of the index's segments merged towards one; answers the segments folded away. */
export const mergeNameIndex = (db: Database) => mergeNameIndexSegments(db, MERGE_PAGES);

export function startNameIndexUpkeep(db: Database, logger: Pick<Logger, "warn" | "debug">, metrics: Pick<Metrics, "searchIndexSegmentsMerged">, everyMs = MERGE_EVERY_MS) {
  let step: Promise<unknown> | undefined;
  const timer = setInterval(() => {
    step ??= mergeNameIndex(db)
      .then((merged) => {
        if (merged > 0) metrics.searchIndexSegmentsMerged.inc(merged);
      })
      .catch((error) => {
        // Writers held the lock past the busy timeout: the index waits for the next step.
        if (isBusy(error)) logger.debug("search index merge met a busy database");
        else logger.warn({ err: error }, "search index merge failed");
      })
      .finally(() => {
        step = undefined;
      });
  }, everyMs);
  return {
    /** No new step; the one under way (if any) finishes before the database closes. */
    async stop() {
      clearInterval(timer);
      await step;
    },
  };
}
