-- A server's restart policy: what berth does when its sandbox stops on
-- its own (its agent died, a limit killed it). 'never' marks it FAILED;
-- 'on_failure' recreates the sandbox, keeping its files, up to a limit of
-- consecutive restarts counted in restarts.

-- +goose Up
ALTER TABLE servers
    ADD COLUMN restart_policy text NOT NULL DEFAULT 'never' CHECK (restart_policy IN ('never', 'on_failure')),
    ADD COLUMN restarts       integer NOT NULL DEFAULT 0;

-- +goose Down
ALTER TABLE servers DROP COLUMN restart_policy, DROP COLUMN restarts;
