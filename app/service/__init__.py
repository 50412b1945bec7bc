"""The queue's rules: limits, the job state machine, retries. Knows nothing of HTTP."""
