// The live event stream (`GET /v1/events`, Server-Sent Events) as an async iterator:
//
//     for await (const event of jobq.events({ queues: ["emails"], kinds: ["failed"] })) {
//       console.log(event.id, event.kind, event.job_id);
//     }
//
// It reconnects by itself when the connection drops, resuming after the last event it
// received with `Last-Event-ID`, so no event is missed nor repeated while the service
// keeps it (an hour by default); an `events_expired` refusal (it fell further behind
// than that) and any other refusal are thrown as `JobqError`. Break out of the loop, or
// abort `signal`, to stop.

import type { components } from "./schema.js";

export type JobqEvent = components["schemas"]["EventOut"];
export type EventKind = JobqEvent["kind"];
type Problem = components["schemas"]["Problem"];

export interface EventsOptions {
  /** Only these queues' events (default: every queue the API key may read). */
  queues?: string[];
  /** Only jobs of these types. */
  types?: string[];
  /** Only events of these kinds. */
  kinds?: EventKind[];
  /** Resume after this event's id (default: from now on). */
  lastEventId?: number;
  /** Aborting it ends the iteration. */
  signal?: AbortSignal;
}

const RECONNECT_MIN_MS = 250;
const RECONNECT_MAX_MS = 10_000;
const RETRIED_STATUSES = new Set([502, 503, 504]);

interface Frame {
  id?: string;
  event?: string;
  data?: string;
}

/** Splits a stream's text into frames, as a browser's EventSource does. */
export class FrameReader {
  private buffer = "";
  private fields = new Map<string, string[]>();

  /** The frames `chunk` completes. */
  feed(chunk: string): Frame[] {
    this.buffer += chunk;
    const frames: Frame[] = [];
    for (;;) {
      const end = this.buffer.search(/\r\n|\r|\n/);
      if (end < 0) return frames;
      const line = this.buffer.slice(0, end);
      this.buffer = this.buffer.slice(this.buffer.startsWith("\r\n", end) ? end + 2 : end + 1);
      if (line === "") {
        if (this.fields.size > 0) {
          const last = (name: string) => this.fields.get(name)?.at(-1);
          frames.push({ id: last("id"), event: last("event"), data: this.fields.get("data")?.join("\n") });
        }
        this.fields = new Map();
        continue;
      }
      const colon = line.indexOf(":");
      const name = colon < 0 ? line : line.slice(0, colon);
      if (name === "") continue; // a comment
      let value = colon < 0 ? "" : line.slice(colon + 1);
      if (value.startsWith(" ")) value = value.slice(1);
      this.fields.set(name, [...(this.fields.get(name) ?? []), value]);
    }
  }
}

/** A refusal of the stream, or its `error` event: the problem it carries. */
export type ProblemError = (problem: Problem) => Error;

/** Follow the events of the jobq service at `url` (see the module's comment). */
export async function* followEvents(
  url: string,
  headers: Record<string, string>,
  options: EventsOptions,
  refused: ProblemError,
): AsyncGenerator<JobqEvent> {
  const query = new URLSearchParams();
  for (const queue of options.queues ?? []) query.append("queue", queue);
  for (const type of options.types ?? []) query.append("type", type);
  for (const kind of options.kinds ?? []) query.append("kind", kind);
  let lastEventId = options.lastEventId;
  let failures = 0;
  while (!options.signal?.aborted) {
    try {
      const response = await fetch(`${url.replace(/\/$/, "")}/v1/events?${query}`, {
        headers: {
          ...headers,
          Accept: "text/event-stream",
          ...(lastEventId !== undefined ? { "Last-Event-ID": String(lastEventId) } : {}),
        },
        signal: options.signal,
      });
      if (!response.ok || response.body === null) {
        const problem = (await response.json().catch(() => null)) as Problem | null;
        if (!RETRIED_STATUSES.has(response.status)) {
          throw refused(
            problem ?? {
              type: "about:blank",
              title: response.statusText,
              status: response.status,
              detail: response.statusText,
              code: "http_error",
            },
          );
        }
      } else {
        const reader = new FrameReader();
        const decoder = new TextDecoder();
        for await (const chunk of response.body as unknown as AsyncIterable<Uint8Array>) {
          for (const frame of reader.feed(decoder.decode(chunk, { stream: true }))) {
            if (frame.event === "error") {
              const problem = JSON.parse(frame.data ?? "{}") as Problem;
              if (!RETRIED_STATUSES.has(problem.status)) throw refused(problem);
              break;
            }
            if (frame.id !== undefined && /^[0-9]+$/.test(frame.id)) lastEventId = Number(frame.id);
            if (frame.data !== undefined) {
              failures = 0;
              yield JSON.parse(frame.data) as JobqEvent;
            }
          }
        }
      }
    } catch (error) {
      if (options.signal?.aborted) return;
      if (!(error instanceof TypeError) && !(error instanceof SyntaxError)) {
        // fetch's network failures are TypeErrors; anything else is a refusal
        if (error instanceof Error && error.name !== "AbortError") throw error;
      }
    }
    const wait = Math.min(RECONNECT_MIN_MS * 2 ** failures, RECONNECT_MAX_MS);
    failures += 1;
    await new Promise((resolve) => setTimeout(resolve, wait));
  }
}
