"""Settings, limits and the error types shared by every layer."""
