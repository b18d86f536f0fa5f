"""http: its modules, each imported where it is used (this file imports nothing).

- `framing`: The strict framing of an HTTP request to the agent or the orchestrator (RFC 9110, RFC 9112):
- `handler`: The connection handling under `gitdns.adapters.http.server.HttpServer`: the threading server
- `server`: The HTTP endpoint of the agent and the orchestrator: health, readiness, status, metrics and
"""
