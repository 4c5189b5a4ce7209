-- The health of a running server's agent, which the watcher checks each
-- round: unhealthy_since is when its checks began to fail (NULL while they
-- pass) and health_error what the last failed one said. A server whose
-- agent fails them for long enough is FAILED (and restarted under
-- restart_policy on_failure). A server becoming unhealthy or healthy
-- again is announced on berth_servers like a change of status, so live
-- pages show it; health_error alone, rewritten by each failed check, is
-- not.

-- +goose Up
ALTER TABLE servers ADD COLUMN unhealthy_since timestamptz, ADD COLUMN health_error text NOT NULL DEFAULT '';

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION notify_server() RETURNS trigger AS $$
BEGIN
    IF TG_OP = 'INSERT' OR NEW.status IS DISTINCT FROM OLD.status OR NEW.error IS DISTINCT FROM OLD.error
        OR NEW.owner_id IS DISTINCT FROM OLD.owner_id
        OR (NEW.unhealthy_since IS NULL) IS DISTINCT FROM (OLD.unhealthy_since IS NULL) THEN
        PERFORM pg_notify('berth_servers', NEW.id::text || ' ' || NEW.status || ' ' || coalesce(NEW.owner_id::text, ''));
    END IF;
    RETURN NEW;
END;
$$ LANGUAGE plpgsql;
-- +goose StatementEnd

DROP TRIGGER servers_notify ON servers;
CREATE TRIGGER servers_notify AFTER INSERT OR UPDATE OF status, error, owner_id, unhealthy_since ON servers
    FOR EACH ROW EXECUTE FUNCTION notify_server();

-- +goose Down
DROP TRIGGER servers_notify ON servers;
CREATE TRIGGER servers_notify AFTER INSERT OR UPDATE OF status, error, owner_id ON servers
    FOR EACH ROW EXECUTE FUNCTION notify_server();
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION notify_server() RETURNS trigger AS $$
BEGIN
    IF TG_OP = 'INSERT' OR NEW.status IS DISTINCT FROM OLD.status OR NEW.error IS DISTINCT FROM OLD.error
        OR NEW.owner_id IS DISTINCT FROM OLD.owner_id THEN
        PERFORM pg_notify('berth_servers', NEW.id::text || ' ' || NEW.status || ' ' || coalesce(NEW.owner_id::text, ''));
    END IF;
    RETURN NEW;
END;
$$ LANGUAGE plpgsql;
-- +goose StatementEnd
ALTER TABLE servers DROP COLUMN unhealthy_since, DROP COLUMN health_error;
