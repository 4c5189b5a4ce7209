-- How far a running operation is, when it can say: a start that pulls
-- its sandbox's image records the bytes and layers fetched so far, so
-- that callers waiting for it (MCP progress notifications, the console's
-- live pages) see a slow first pull advance on whichever replica runs it.
-- A change of progress is announced like a change of status; the workers
-- wake only for SCHEDULED operations, so it costs them nothing.

-- A change of progress alone is announced with a fourth word, "progress"
-- ("<id> <status> <server id> progress"), so that only those who want it
-- (callers waiting for the operation) read the row again.

-- +goose Up
ALTER TABLE operations ADD COLUMN progress jsonb;

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION notify_operation() RETURNS trigger AS $$
BEGIN
    IF TG_OP = 'INSERT' OR NEW.status IS DISTINCT FROM OLD.status THEN
        PERFORM pg_notify('berth_operations', NEW.id::text || ' ' || NEW.status || ' ' || coalesce(NEW.server_id::text, ''));
    ELSIF NEW.progress IS DISTINCT FROM OLD.progress THEN
        PERFORM pg_notify('berth_operations', NEW.id::text || ' ' || NEW.status || ' ' || coalesce(NEW.server_id::text, '') || ' progress');
    END IF;
    RETURN NEW;
END;
$$ LANGUAGE plpgsql;
-- +goose StatementEnd

DROP TRIGGER operations_notify ON operations;
CREATE TRIGGER operations_notify AFTER INSERT OR UPDATE OF status, progress ON operations
    FOR EACH ROW EXECUTE FUNCTION notify_operation();

-- +goose Down
DROP TRIGGER operations_notify ON operations;
CREATE TRIGGER operations_notify AFTER INSERT OR UPDATE OF status ON operations
    FOR EACH ROW EXECUTE FUNCTION notify_operation();
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
ALTER TABLE operations DROP COLUMN progress;
