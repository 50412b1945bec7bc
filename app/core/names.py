"""The rules names follow, defined once for the API's schemas, the services and the CLI.

Queue, job type and API key names share one pattern; a key's queue rule is a name or
a pattern where `*` matches any run of characters (`reports.*`).
"""

from __future__ import annotations

import re

from app.core.tracecontext import TRACEPARENT_PATTERN, TRACEPARENT_RULE

NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}$"
MAX_NAME_LENGTH = 128  # what NAME_PATTERN allows, also stated as maxLength
QUEUE_RULE_PATTERN = r"^[A-Za-z0-9_.:*-]{1,128}$"
MAX_BIGINT = 2**63 - 1  # the largest job id
# The scheduler's idempotency keys (`schedule:<name>:<tick>`): no client may take one.
TICK_KEY_PREFIX = "schedule:"

# What a name that does not match is told, in words rather than the pattern.
PATTERN_RULES = {
    NAME_PATTERN: "must be 1 to 128 letters, digits and _ . : - (not first)",
    QUEUE_RULE_PATTERN: (
        "queue names or patterns such as 'reports.*' are 1 to 128 letters, digits and _ . : - *"
    ),
    TRACEPARENT_PATTERN: f"must be {TRACEPARENT_RULE}",
}

_NAME = re.compile(NAME_PATTERN)
_QUEUE_RULE = re.compile(QUEUE_RULE_PATTERN)


def is_name(value: str) -> bool:
    """Is `value` a valid queue, job type or key name?"""
    return _NAME.match(value) is not None


def is_queue_rule(value: str) -> bool:
    """Is `value` a valid queue name or `*` pattern for an API key?"""
    return _QUEUE_RULE.match(value) is not None
