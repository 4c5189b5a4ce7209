-- Each server's egress policy, read by the egress gateway on every new
-- connection its sandbox makes (so a change applies at once, on whichever
-- replica carries the sandbox's traffic), the bytes its sandbox has sent
-- and received through the gateway (its byte limit survives a restart of
-- that replica), and the last connections the gateway refused, which
-- get_server and the console show. A server recorded before egress
-- existed, or on a runtime that does not enforce policies, has an empty
-- one ({}): its gateway, if it has one, lets nothing out.

-- +goose Up
ALTER TABLE servers ADD COLUMN network jsonb NOT NULL DEFAULT '{}';
ALTER TABLE servers ADD COLUMN egress_bytes bigint NOT NULL DEFAULT 0;

CREATE TABLE egress_refusals (
    id        bigserial PRIMARY KEY,
    server_id uuid NOT NULL REFERENCES servers(id) ON DELETE CASCADE,
    at        timestamptz NOT NULL,
    name      text NOT NULL DEFAULT '',
    address   text NOT NULL DEFAULT '',
    reason    text NOT NULL,
    -- how many refusals of the same destination and reason this row
    -- stands for: a sandbox retrying in a loop makes one row, not many.
    count     integer NOT NULL DEFAULT 1
);
CREATE INDEX egress_refusals_server ON egress_refusals (server_id, id DESC);

-- +goose Down
DROP TABLE egress_refusals;
ALTER TABLE servers DROP COLUMN egress_bytes;
ALTER TABLE servers DROP COLUMN network;
