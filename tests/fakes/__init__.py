"""In-process fakes of external services the tests talk to over the wire."""
