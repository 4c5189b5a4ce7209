-- MCP servers inside a server's sandbox that its agent proxies
-- (start_server's mcp_upstreams). The names are shown; the declarations
-- (URLs and headers, which may carry credentials) are sealed like env.

-- +goose Up
ALTER TABLE servers
    ADD COLUMN upstream_names   text[] NOT NULL DEFAULT '{}',
    ADD COLUMN upstreams_sealed bytea;

-- +goose Down
ALTER TABLE servers DROP COLUMN upstream_names, DROP COLUMN upstreams_sealed;
