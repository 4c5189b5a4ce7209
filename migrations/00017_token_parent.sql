-- The credential a session token was minted with (create_token over MCP
-- or REST, berth token create --remote): another session token, or an
-- access token of berth's authorization server. A minted token never
-- outlives it (its expiry is capped at the parent's when it is made) and
-- is revoked with it: revoking a session token revokes every token minted
-- with it, at any depth, and revoking an OAuth access token or its grant
-- (the user revoking the app, a refresh token replayed) revokes the tokens
-- minted with that access token. Tokens made by the operator or on the
-- console have neither. A parent row that is deleted took its children's
-- lifetime with it (they expire no later), so the link is just cleared.

-- +goose Up
ALTER TABLE session_tokens ADD COLUMN parent_token_id uuid REFERENCES session_tokens (id) ON DELETE SET NULL;
ALTER TABLE session_tokens ADD COLUMN parent_oauth_token_id uuid REFERENCES oauth_tokens (id) ON DELETE SET NULL;
CREATE INDEX session_tokens_parent_token_idx ON session_tokens (parent_token_id) WHERE parent_token_id IS NOT NULL;
CREATE INDEX session_tokens_parent_oauth_token_idx ON session_tokens (parent_oauth_token_id) WHERE parent_oauth_token_id IS NOT NULL;

-- +goose Down
DROP INDEX session_tokens_parent_oauth_token_idx;
DROP INDEX session_tokens_parent_token_idx;
ALTER TABLE session_tokens DROP COLUMN parent_oauth_token_id;
ALTER TABLE session_tokens DROP COLUMN parent_token_id;
