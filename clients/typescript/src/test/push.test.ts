// verifyDelivery against requests signed with the `standardwebhooks` library itself, as
// jobq signs them (one signature per secret, space-separated): valid with one secret and
// with either of two, and refused when tampered with, signed with another secret, too old
// or too new, or missing a header. No service needed; client.test.ts has jobq push a job
// to an endpoint that verifies it.

import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { test } from "node:test";
import { Webhook } from "standardwebhooks";
import { DELIVERY_TOLERANCE_SECONDS, InvalidDelivery, verifyDelivery } from "../index.js";

const newSecret = () => `whsec_${randomBytes(32).toString("base64")}`;
const [CURRENT, OLD, OTHER] = [newSecret(), newSecret(), newSecret()];
const ENVELOPE = {
  job_id: 42,
  queue: "emails",
  type: "send_welcome",
  payload: { to: "ada@example.com" },
  attempt: 1,
  max_attempts: 5,
  lease_id: "42-5f0c3c1e9a7b4d2e8f6a1b2c3d4e5f60",
  lease_expires_at: "2026-11-28T12:00:30.000000Z",
  metadata: { tenant: "acme" },
  parents: [{ id: 41, type: "render", state: "succeeded", result: { html: "<p>" } }],
};
const BODY = JSON.stringify(ENVELOPE);
const ID = "job_42_attempt_1";

/** The three headers jobq sends for `body`, signed with each of `secrets`, at `at`. */
function signed(body: string, secrets: string[], at = new Date()): Record<string, string> {
  return {
    "webhook-id": ID,
    "webhook-timestamp": String(Math.floor(at.getTime() / 1000)),
    "webhook-signature": secrets.map((secret) => new Webhook(secret).sign(ID, at, body)).join(" "),
  };
}

const refused = (pattern: RegExp) => (error: unknown) =>
  error instanceof InvalidDelivery && error.name === "InvalidDelivery" && pattern.test(error.message);

test("a delivery signed with the secret gives its envelope, typed", () => {
  const delivery = verifyDelivery(BODY, signed(BODY, [CURRENT]), CURRENT);
  assert.deepEqual(delivery, {
    ...ENVELOPE,
    lease_expires_at: new Date("2026-11-28T12:00:30Z"),
    message_id: ID,
  });
  // bytes as they arrived, and a list of one secret, alike
  const bytes = verifyDelivery(Buffer.from(BODY), signed(BODY, [CURRENT]), [CURRENT]);
  assert.deepEqual(bytes, delivery);
  const view = new TextEncoder().encode(BODY);
  assert.equal(verifyDelivery(view, signed(BODY, [CURRENT]), [CURRENT]).job_id, 42);
});

test("while a secret rotates, either one verifies; a list of secrets tries each", () => {
  const headers = signed(BODY, [CURRENT, OLD]); // the target holds [new, old]
  assert.equal(verifyDelivery(BODY, headers, OLD).job_id, 42); // the second signature
  assert.equal(verifyDelivery(BODY, headers, CURRENT).job_id, 42);
  // the receiver holds two, the request is signed with its second one only
  assert.equal(verifyDelivery(BODY, signed(BODY, [OLD]), [OTHER, OLD]).job_id, 42);
});

test("a tampered body or another secret is refused", () => {
  const headers = signed(BODY, [CURRENT]);
  const tampered = BODY.replace("ada@example.com", "eve@example.com");
  assert.throws(() => verifyDelivery(tampered, headers, CURRENT), refused(/no matching signature/));
  assert.throws(() => verifyDelivery(BODY, headers, [OTHER, OLD]), refused(/no matching signature/));
  const forged = { ...headers, "webhook-id": "job_42_attempt_2" };
  assert.throws(() => verifyDelivery(BODY, forged, CURRENT), refused(/no matching signature/));
  assert.throws(() => verifyDelivery(BODY, headers, []), refused(/no secret/));
});

test("a timestamp further than five minutes either way is refused (a replay)", () => {
  assert.equal(DELIVERY_TOLERANCE_SECONDS, 300); // Python's and the library's
  const minutesAgo = (minutes: number) => new Date(Date.now() - minutes * 60_000);
  const old = signed(BODY, [CURRENT], minutesAgo(6));
  assert.throws(() => verifyDelivery(BODY, old, CURRENT), refused(/too old/));
  const future = signed(BODY, [CURRENT], minutesAgo(-6));
  assert.throws(() => verifyDelivery(BODY, future, CURRENT), refused(/too new/));
  const recent = signed(BODY, [CURRENT], minutesAgo(4));
  assert.equal(verifyDelivery(BODY, recent, CURRENT).job_id, 42);
  // a receiver may be stricter, never looser than the standard
  assert.throws(() => verifyDelivery(BODY, recent, CURRENT, { toleranceSeconds: 60 }), refused(/too old/));
  assert.throws(() => verifyDelivery(BODY, recent, CURRENT, { toleranceSeconds: 600 }), RangeError);
});

test("a missing header is refused, named", () => {
  for (const name of ["webhook-id", "webhook-timestamp", "webhook-signature"]) {
    const headers: Record<string, string> = signed(BODY, [CURRENT]);
    delete headers[name];
    assert.throws(() => verifyDelivery(BODY, headers, CURRENT), refused(new RegExp(`missing header ${name}`)));
  }
  assert.throws(() => verifyDelivery(BODY, {}, CURRENT), refused(/webhook-id, webhook-timestamp, webhook-signature/));
});

test("headers as a Headers instance or an object in any case verify alike", () => {
  const headers = signed(BODY, [CURRENT]);
  const fetched = verifyDelivery(BODY, new Headers(headers), CURRENT);
  const shouted = Object.fromEntries(Object.entries(headers).map(([name, value]) => [name.toUpperCase(), value]));
  const titled = { "Webhook-Id": ID, "Webhook-Timestamp": headers["webhook-timestamp"], "Webhook-Signature": [headers["webhook-signature"]!] };
  assert.deepEqual(verifyDelivery(BODY, shouted, CURRENT), fetched);
  assert.deepEqual(verifyDelivery(BODY, titled, CURRENT), fetched);
  assert.equal(fetched.message_id, ID);
  const fetchedMissing = new Headers(headers);
  fetchedMissing.delete("webhook-signature");
  assert.throws(() => verifyDelivery(BODY, fetchedMissing, CURRENT), refused(/missing header webhook-signature/));
});

test("a signed body that is not a delivery is refused; a malformed secret is a TypeError", () => {
  for (const body of ["[1, 2]", "not json", JSON.stringify({ ...ENVELOPE, job_id: "42" }), JSON.stringify({ queue: "q" })]) {
    assert.throws(() => verifyDelivery(body, signed(body, [CURRENT]), CURRENT), refused(/not (a delivery|JSON)/));
  }
  assert.throws(() => verifyDelivery(BODY, signed(BODY, [CURRENT]), "whsec_not base64!"), TypeError);
});
