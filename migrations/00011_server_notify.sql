-- Live pages (the web console's server page and sandboxes list) learn of
-- changes from PostgreSQL, as operation waiters do, so that any replica
-- serves them and nobody polls. An operation's announcement now names its
-- server too ("<operation id> <status> <server id>", the server id empty
-- for operations of none), so a server's watchers hear of its commands;
-- and a server's own changes (status, error, owner: a warm sandbox
-- handed out) are announced on berth_servers as
-- "<server id> <status> <owner id>". Touches of last_activity_at are not
-- announced: the trigger fires only for the columns that change what a
-- page shows.

-- +goose Up
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION notify_operation() RETURNS trigger AS $$
BEGIN
    IF TG_OP = 'INSERT' OR NEW.status IS DISTINCT FROM OLD.status THEN
        PERFORM pg_notify('berth_operations', NEW.id::text || ' ' || NEW.status || ' ' || coalesce(NEW.server_id::text, ''));
    END IF;
    RETURN NEW;
END;
$$ LANGUAGE plpgsql;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE FUNCTION notify_server() RETURNS trigger AS $$
BEGIN
    IF TG_OP = 'INSERT' OR NEW.status IS DISTINCT FROM OLD.status OR NEW.error IS DISTINCT FROM OLD.error
        OR NEW.owner_id IS DISTINCT FROM OLD.owner_id THEN
        PERFORM pg_notify('berth_servers', NEW.id::text || ' ' || NEW.status || ' ' || coalesce(NEW.owner_id::text, ''));
    END IF;
    RETURN NEW;
END;
$$ LANGUAGE plpgsql;
-- +goose StatementEnd

CREATE TRIGGER servers_notify AFTER INSERT OR UPDATE OF status, error, owner_id ON servers
    FOR EACH ROW EXECUTE FUNCTION notify_server();

-- +goose Down
DROP TRIGGER servers_notify ON servers;
DROP FUNCTION notify_server();
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION notify_operation() RETURNS trigger AS $$
BEGIN
    IF TG_OP = 'INSERT' OR NEW.status IS DISTINCT FROM OLD.status THEN
        PERFORM pg_notify('berth_operations', NEW.id::text || ' ' || NEW.status);
    END IF;
    RETURN NEW;
END;
$$ LANGUAGE plpgsql;
-- +goose StatementEnd
