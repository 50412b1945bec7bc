// Receiving push deliveries: `verifyDelivery` checks a request jobq POSTed to your
// endpoint (its Standard Webhooks signature, with the `standardwebhooks` package, and its
// timestamp) and gives its envelope, as the Python SDK's `verify_delivery`:
//
//     const delivery = verifyDelivery(rawBody, request.headers, SECRETS);
//     return handle(delivery.type, delivery.payload); // a 2xx with a JSON body completes the job
//
// Verify the body exactly as it arrived (the raw text or bytes, not JSON parsed and
// serialized again): the signature covers those bytes.

import { Webhook, WebhookVerificationError } from "standardwebhooks";
import type { components } from "./schema.js";

/** A job jobq pushed to your endpoint: the envelope's fields, as the API names them, and
 * `message_id`. `lease_id` finishes it later (after a 202), through
 * `POST /v1/leases/{lease_id}/complete`, `/fail` or `/heartbeat`. */
export interface Delivery {
  job_id: number;
  queue: string;
  type: string;
  payload: unknown;
  attempt: number;
  max_attempts: number;
  lease_id: string;
  /** When the lease ends, as a time (the envelope's ISO 8601 text, parsed). */
  lease_expires_at: Date;
  metadata: Record<string, unknown>;
  /** A dependent job's parents with their results (empty otherwise). */
  parents: components["schemas"]["ParentOut"][];
  /** `webhook-id`: the same for a repeated delivery of one attempt (drop a repeat by it). */
  message_id: string;
}

/** The request is not a delivery signed with one of the secrets, or it is too old or too
 * new (more than the tolerance from now: a replay). Answer it 4xx. */
export class InvalidDelivery extends Error {
  override name = "InvalidDelivery";
}

/** Request headers: a plain object (any case; Node's `IncomingHttpHeaders`, Express's
 * `req.headers`, a Lambda event's `headers`) or a fetch `Headers`. */
export type DeliveryHeaders = Headers | Record<string, string | string[] | undefined>;

export interface VerifyOptions {
  /** Refuse a timestamp further than this from now, either way (default 300: five
   * minutes, the Standard Webhooks tolerance and Python's). It may only be shorter:
   * `standardwebhooks` refuses anything past five minutes. */
  toleranceSeconds?: number;
}

/** The Standard Webhooks tolerance, fixed in `standardwebhooks` (and in Python's). */
export const DELIVERY_TOLERANCE_SECONDS = 300;
const REQUIRED = ["webhook-id", "webhook-timestamp", "webhook-signature"] as const;

function plainHeaders(headers: DeliveryHeaders): Record<string, string> {
  const plain: Record<string, string> = {};
  if (typeof Headers !== "undefined" && headers instanceof Headers) {
    headers.forEach((value, name) => {
      plain[name.toLowerCase()] = value;
    });
    return plain;
  }
  for (const [name, value] of Object.entries(headers as Record<string, string | string[] | undefined>)) {
    const text = Array.isArray(value) ? value[0] : value;
    if (typeof text === "string") plain[name.toLowerCase()] = text;
  }
  return plain;
}

function bodyText(body: string | Uint8Array | ArrayBuffer): string {
  if (typeof body === "string") return body;
  try {
    return new TextDecoder("utf-8", { fatal: true }).decode(body);
  } catch {
    throw new InvalidDelivery("the body is not UTF-8 text");
  }
}

function signer(secret: string): Webhook {
  try {
    return new Webhook(secret);
  } catch (error) {
    throw new TypeError(`a secret is whsec_ then base64: ${(error as Error).message}`);
  }
}

const isObject = (value: unknown): value is Record<string, unknown> =>
  typeof value === "object" && value !== null && !Array.isArray(value);

/** The envelope's fields, checked for their types. */
function envelope(data: unknown, messageId: string): Delivery {
  if (!isObject(data)) throw new InvalidDelivery("the body is not a delivery");
  const wrong = (field: string) => new InvalidDelivery(`the body is not a delivery: ${field}`);
  const integer = (field: string) => {
    if (!Number.isSafeInteger(data[field])) throw wrong(field);
    return data[field] as number;
  };
  const text = (field: string) => {
    if (typeof data[field] !== "string") throw wrong(field);
    return data[field] as string;
  };
  const leaseExpiresAt = new Date(text("lease_expires_at"));
  if (Number.isNaN(leaseExpiresAt.getTime())) throw wrong("lease_expires_at");
  const metadata = data.metadata ?? {};
  const parents = data.parents ?? [];
  if (!isObject(metadata)) throw wrong("metadata");
  if (!Array.isArray(parents) || !parents.every(isObject)) throw wrong("parents");
  return {
    job_id: integer("job_id"),
    queue: text("queue"),
    type: text("type"),
    payload: data.payload ?? null,
    attempt: integer("attempt"),
    max_attempts: integer("max_attempts"),
    lease_id: text("lease_id"),
    lease_expires_at: leaseExpiresAt,
    metadata,
    parents: parents as Delivery["parents"],
    message_id: messageId,
  };
}

/**
 * The delivery in `body`, once its signature checks out with one of `secrets` (`whsec_…`;
 * give both while rotating) and its `webhook-timestamp` is within `toleranceSeconds` of
 * now; else `InvalidDelivery` (a missing header, a bad signature, an old or future
 * timestamp, a body that is not a delivery). A malformed secret is a `TypeError`.
 *
 * `body` is the request's raw body (text or bytes) as it arrived.
 */
export function verifyDelivery(
  body: string | Uint8Array | ArrayBuffer,
  headers: DeliveryHeaders,
  secrets: string | readonly string[],
  options: VerifyOptions = {},
): Delivery {
  const tolerance = options.toleranceSeconds ?? DELIVERY_TOLERANCE_SECONDS;
  if (!(tolerance >= 0 && tolerance <= DELIVERY_TOLERANCE_SECONDS)) {
    throw new RangeError(`toleranceSeconds is 0 to ${DELIVERY_TOLERANCE_SECONDS}, not ${tolerance}`);
  }
  const signers = (typeof secrets === "string" ? [secrets] : [...secrets]).map(signer);
  if (!signers.length) throw new InvalidDelivery("no secret to verify with");
  const plain = plainHeaders(headers);
  const missing = REQUIRED.filter((name) => !plain[name]);
  if (missing.length) throw new InvalidDelivery(`missing header ${missing.join(", ")}`);
  // standardwebhooks checks five minutes; a shorter tolerance is checked here first
  const age = Math.floor(Date.now() / 1000) - Number(plain["webhook-timestamp"]);
  if (Number.isFinite(age) && Math.abs(age) > tolerance) {
    throw new InvalidDelivery(`message timestamp too ${age > 0 ? "old" : "new"}`);
  }
  const text = bodyText(body);
  let failure: unknown;
  for (const hook of signers) {
    try {
      hook.verify(text, plain, { jsonParse: false }); // the body is parsed below
    } catch (error) {
      failure = error;
      continue;
    }
    let parsed: unknown;
    try {
      parsed = JSON.parse(text);
    } catch {
      throw new InvalidDelivery("the body is not JSON");
    }
    return envelope(parsed, plain["webhook-id"] ?? "");
  }
  const reason = failure instanceof WebhookVerificationError ? failure.message : String(failure);
  throw new InvalidDelivery(reason.charAt(0).toLowerCase() + reason.slice(1));
}
