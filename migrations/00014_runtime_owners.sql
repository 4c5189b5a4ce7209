-- Every sandbox belongs to the runtime that made it (issue 18): a local
-- runtime's sandboxes are processes of one host, reached through sockets
-- in one berth's data directory, so only that berth may act on them.
-- servers.runtime_owner names the owner of the server's sandbox (a local
-- runtime's id, "kubernetes" for the cluster every replica reaches, ''
-- for a server not placed yet or recorded before this migration: any
-- replica may act on those). runtime_owners is the liveness record of
-- each owner, written by its replicas every few seconds, so that a
-- sandbox whose owner is gone is reported as such.

-- +goose Up
ALTER TABLE servers ADD COLUMN runtime_owner text NOT NULL DEFAULT '';
CREATE INDEX servers_runtime_owner ON servers (runtime_owner, status)
    WHERE status IN ('STARTING', 'RUNNING', 'FINISHED', 'STOPPING');

CREATE TABLE runtime_owners (
    id         text PRIMARY KEY,
    -- where, for operators (host and data directory)
    name       text NOT NULL,
    -- the host, and the URL of the replica that last wrote the row:
    -- what a client is told to reach instead
    host       text NOT NULL DEFAULT '',
    url        text NOT NULL DEFAULT '',
    shared     boolean NOT NULL DEFAULT false,
    seen_at    timestamptz NOT NULL DEFAULT now()
);

-- +goose Down
DROP TABLE runtime_owners;
DROP INDEX servers_runtime_owner;
ALTER TABLE servers DROP COLUMN runtime_owner;
