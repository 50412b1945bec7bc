"""HTTP: routes, request limits, and the translation of errors into problem+json."""
