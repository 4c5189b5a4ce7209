-- The ttl, in ms, berth granted an operation run as an MCP task (the one
-- the client asked in tools/call, capped): tasks/get and tasks/list
-- report it on every replica. NULL for operations that are no such task,
-- which report berth's cap. berth deletes no operation, so the ttl is a
-- promise kept, not a deadline enforced.

-- +goose Up
ALTER TABLE operations ADD COLUMN task_ttl_ms bigint CHECK (task_ttl_ms >= 0);

-- +goose Down
ALTER TABLE operations DROP COLUMN task_ttl_ms;
