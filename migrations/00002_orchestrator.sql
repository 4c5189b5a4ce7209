-- +goose Up
-- Clients, servers and the asynchronous operations that change them
-- (IdeGYM model). Each replica works from these tables only, so any
-- replica can serve any request and finish any operation.

CREATE TABLE clients (
    id                uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    owner_id          uuid NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    name              text NOT NULL CHECK (length(name) BETWEEN 1 AND 128),
    namespace         text NOT NULL CHECK (namespace ~ '^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$'),
    nodes_count       integer NOT NULL DEFAULT 0 CHECK (nodes_count >= 0),
    status            text NOT NULL DEFAULT 'ALIVE' CHECK (status IN ('ALIVE', 'FINISHED', 'STOPPED')),
    created_at        timestamptz NOT NULL DEFAULT now(),
    updated_at        timestamptz NOT NULL DEFAULT now(),
    last_heartbeat_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX clients_owner ON clients (owner_id, created_at DESC);

CREATE TABLE servers (
    id                 uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    client_id          uuid REFERENCES clients(id) ON DELETE SET NULL,
    owner_id           uuid REFERENCES users(id) ON DELETE CASCADE,
    namespace          text NOT NULL,
    server_name        text NOT NULL,
    image_tag          text NOT NULL,
    runtime_class_name text NOT NULL DEFAULT '',
    resources          jsonb NOT NULL DEFAULT '{}',
    -- reuse_key is a digest of image_tag, server_name and the runtime
    -- options: a FINISHED server with the same key can be handed out again.
    reuse_key          text NOT NULL,
    -- env values may be secrets: sealed with the server key, never clear.
    env_sealed         bytea,
    env_keys           text[] NOT NULL DEFAULT '{}',
    status             text NOT NULL CHECK (status IN ('STARTING', 'RUNNING', 'FINISHED', 'STOPPING', 'STOPPED', 'FAILED')),
    warm               boolean NOT NULL DEFAULT false,
    endpoint           jsonb,
    error              text NOT NULL DEFAULT '',
    created_at         timestamptz NOT NULL DEFAULT now(),
    updated_at         timestamptz NOT NULL DEFAULT now(),
    last_activity_at   timestamptz NOT NULL DEFAULT now(),
    finished_at        timestamptz,
    stopped_at         timestamptz
);
CREATE INDEX servers_client ON servers (client_id);
CREATE INDEX servers_owner ON servers (owner_id, created_at DESC);
CREATE INDEX servers_reuse ON servers (reuse_key, finished_at) WHERE status = 'FINISHED';
CREATE INDEX servers_warm ON servers (image_tag) WHERE warm AND status = 'RUNNING';
CREATE INDEX servers_alive ON servers (status, last_activity_at) WHERE status IN ('RUNNING', 'FINISHED', 'STARTING');

CREATE TABLE operations (
    id               uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    owner_id         uuid REFERENCES users(id) ON DELETE CASCADE,
    namespace        text NOT NULL DEFAULT '',
    type             text NOT NULL,
    status           text NOT NULL DEFAULT 'SCHEDULED' CHECK (status IN ('SCHEDULED', 'IN_PROGRESS', 'SUCCEEDED', 'FAILED', 'CANCELLED')),
    server_id        uuid REFERENCES servers(id) ON DELETE SET NULL,
    params           jsonb NOT NULL DEFAULT '{}',
    params_sealed    bytea,
    result           text, -- JSON text, handed to callers as a string (IdeGYM)
    error            text NOT NULL DEFAULT '',
    attempts         integer NOT NULL DEFAULT 0,
    lease_owner      text,
    lease_expires_at timestamptz,
    created_at       timestamptz NOT NULL DEFAULT now(),
    updated_at       timestamptz NOT NULL DEFAULT now(),
    finished_at      timestamptz
);
CREATE INDEX operations_due ON operations (created_at) WHERE status IN ('SCHEDULED', 'IN_PROGRESS');
CREATE INDEX operations_owner ON operations (owner_id, created_at DESC);
CREATE INDEX operations_server ON operations (server_id, created_at DESC);

-- Running execs, for the per-user concurrency quota across replicas. A row
-- expires by itself when the replica running the exec dies.
CREATE TABLE exec_slots (
    id         uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    user_id    uuid NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    server_id  uuid,
    expires_at timestamptz NOT NULL
);
CREATE INDEX exec_slots_user ON exec_slots (user_id, expires_at);

-- Every change of an operation's status is announced, so that workers wake
-- for new work and callers waiting for a result (wait_seconds) wake when it
-- is done, on whichever replica they are.
-- +goose StatementBegin
CREATE FUNCTION notify_operation() RETURNS trigger AS $$
BEGIN
    IF TG_OP = 'INSERT' OR NEW.status IS DISTINCT FROM OLD.status THEN
        PERFORM pg_notify('berth_operations', NEW.id::text || ' ' || NEW.status);
    END IF;
    RETURN NEW;
END;
$$ LANGUAGE plpgsql;
-- +goose StatementEnd

CREATE TRIGGER operations_notify AFTER INSERT OR UPDATE OF status ON operations
    FOR EACH ROW EXECUTE FUNCTION notify_operation();

-- +goose Down
DROP TABLE exec_slots;
DROP TABLE operations;
DROP FUNCTION notify_operation();
DROP TABLE servers;
DROP TABLE clients;
