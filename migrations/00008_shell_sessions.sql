-- Shell sessions: cli-mcp-server's one-tool flow, where a caller runs bash
-- under a session key of its own choosing and berth finds or starts the
-- sandbox for it. The mapping lives here rather than in a replica's
-- memory, so any replica routes a session's calls to the same server.

-- +goose Up
CREATE TABLE shell_sessions (
    owner_id     uuid NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    -- session_key is the caller's X-Session-ID, an RFC 1123 label as
    -- cli-mcp-server requires.
    session_key  text NOT NULL CHECK (session_key ~ '^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$'),
    -- client_id is the client berth registered for the session; it goes
    -- when the session ends.
    client_id    uuid NOT NULL REFERENCES clients(id) ON DELETE CASCADE,
    server_id    uuid NOT NULL REFERENCES servers(id) ON DELETE CASCADE,
    -- operation_id is the server's start, which later callers wait on
    -- while it runs.
    operation_id uuid REFERENCES operations(id) ON DELETE SET NULL,
    created_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (owner_id, session_key)
);
CREATE UNIQUE INDEX shell_sessions_server ON shell_sessions (server_id);

-- +goose Down
DROP TABLE shell_sessions;
