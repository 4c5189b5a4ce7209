-- A failed operation names the code of its error (bad_request, bad_gateway,
-- internal, ...) next to the message, as every error berth answers does, so
-- a client tells a command the agent refused from a sandbox that broke
-- without reading the message.

-- +goose Up
ALTER TABLE operations ADD COLUMN error_code text NOT NULL DEFAULT '';

-- +goose Down
ALTER TABLE operations DROP COLUMN error_code;
