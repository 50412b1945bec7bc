"""Standard Webhooks signatures (`app.delivery.signing`), checked with the
`standardwebhooks` package a receiver uses."""

from __future__ import annotations

import logging
from datetime import UTC, datetime, timedelta

import pytest
from standardwebhooks import Webhook, WebhookVerificationError

from app.delivery import Secrets, fingerprint, new_secret, sign


def test_a_receiver_with_the_secret_verifies_the_request() -> None:
    secret = new_secret()
    headers = sign(Secrets([secret]), "job-1-attempt-1", '{"a": 1}')
    assert set(headers) == {"webhook-id", "webhook-timestamp", "webhook-signature"}
    assert Webhook(secret).verify('{"a": 1}', headers) == {"a": 1}
    with pytest.raises(WebhookVerificationError):
        Webhook(new_secret()).verify('{"a": 1}', headers)
    with pytest.raises(WebhookVerificationError):
        Webhook(secret).verify('{"a": 2}', headers)


def test_while_a_secret_is_rotated_either_one_verifies() -> None:
    old, new = new_secret(), new_secret()
    headers = sign(Secrets([new, old]), "m", "{}")
    assert len(headers["webhook-signature"].split(" ")) == 2
    for secret in (old, new):
        Webhook(secret).verify("{}", headers)


def test_an_old_timestamp_is_refused_by_the_receiver() -> None:
    secret = new_secret()
    headers = sign(Secrets([secret]), "m", "{}", at=datetime.now(UTC) - timedelta(minutes=10))
    with pytest.raises(WebhookVerificationError, match="too old"):
        Webhook(secret).verify("{}", headers)


@pytest.mark.parametrize(
    "texts",
    [[], ["whsec_" + "A" * 8], ["nope"], ["whsec_!!!"], ["whsec_" + "A" * 32] * 2,
     [new_secret(), new_secret(), new_secret()]],
)  # fmt: skip
def test_malformed_secrets_are_refused(texts: list[str]) -> None:
    with pytest.raises(ValueError):
        Secrets.parse(texts)


def test_secrets_never_show_their_values(caplog: pytest.LogCaptureFixture) -> None:
    secret = new_secret()
    secrets = Secrets([secret])
    logging.getLogger("test").warning("target secrets %s %r", secrets, secrets)
    shown = f"{secrets} {secrets!r} {secrets.fingerprints()} {caplog.text}"
    assert secret not in shown and secret.removeprefix("whsec_") not in shown
    assert fingerprint(secret) in shown
    assert secrets.reveal() == (secret,)
