-- The built-in OAuth 2.1 authorization server (internal/oauth): registered
-- clients, browser sessions, pending logins, consents, authorization codes
-- and the tokens issued from them. Every secret (client secrets,
-- registration access tokens, session cookies, codes, tokens) is stored as
-- its SHA-256 only.

-- +goose Up
-- Clients registered through Dynamic Client Registration (RFC 7591).
-- Clients identified by a metadata document URL are not stored here.
CREATE TABLE oauth_clients (
    client_id                  text        PRIMARY KEY,
    -- NULL for public clients (token_endpoint_auth_method 'none').
    secret_hash                bytea,
    registration_token_hash    bytea       NOT NULL,
    token_endpoint_auth_method text        NOT NULL,
    client_name                text        NOT NULL DEFAULT '',
    redirect_uris              text[]      NOT NULL,
    grant_types                text[]      NOT NULL,
    -- The registered metadata as answered by RFC 7592 reads.
    metadata                   jsonb       NOT NULL,
    created_at                 timestamptz NOT NULL DEFAULT now(),
    updated_at                 timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT oauth_clients_auth_method_check
        CHECK (token_endpoint_auth_method IN ('none', 'client_secret_basic', 'client_secret_post')),
    CONSTRAINT oauth_clients_secret_check
        CHECK ((token_endpoint_auth_method = 'none') = (secret_hash IS NULL)),
    CONSTRAINT oauth_clients_registration_token_hash_key UNIQUE (registration_token_hash)
);

-- Browser sessions of the authorization server's pages (login, consent,
-- authorized apps), referenced by a random cookie.
CREATE TABLE oauth_browser_sessions (
    id         uuid        PRIMARY KEY DEFAULT gen_random_uuid(),
    token_hash bytea       NOT NULL,
    user_id    uuid        NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    created_at timestamptz NOT NULL DEFAULT now(),
    expires_at timestamptz NOT NULL,
    CONSTRAINT oauth_browser_sessions_token_hash_key UNIQUE (token_hash)
);
CREATE INDEX oauth_browser_sessions_expires_idx ON oauth_browser_sessions (expires_at);

-- An authorization request waiting for its user to log in; the login
-- comes back with the handle and resumes the request.
CREATE TABLE oauth_login_requests (
    handle_hash  bytea       PRIMARY KEY,
    -- Where the login resumes: an /oauth/authorize?... or /account/... path.
    return_to    text        NOT NULL,
    expires_at   timestamptz NOT NULL
);
CREATE INDEX oauth_login_requests_expires_idx ON oauth_login_requests (expires_at);

-- What a user approved for a client; consent is skipped while it covers
-- the requested scopes.
CREATE TABLE oauth_consents (
    user_id    uuid        NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    client_id  text        NOT NULL,
    client_name text       NOT NULL DEFAULT '',
    scopes     text[]      NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    updated_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (user_id, client_id)
);

-- A grant is one authorization: the code and every access and refresh
-- token that descends from it (the refresh token family). Revoking the
-- grant revokes them all.
CREATE TABLE oauth_grants (
    id         uuid        PRIMARY KEY DEFAULT gen_random_uuid(),
    user_id    uuid        NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    client_id  text        NOT NULL,
    scopes     text[]      NOT NULL,
    resource   text        NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    revoked_at timestamptz,
    revoke_reason text     NOT NULL DEFAULT ''
);
CREATE INDEX oauth_grants_user_client_idx ON oauth_grants (user_id, client_id);

-- Authorization codes: single use, short lived, bound to everything the
-- token request must repeat.
CREATE TABLE oauth_codes (
    code_hash      bytea       PRIMARY KEY,
    grant_id       uuid        NOT NULL REFERENCES oauth_grants (id) ON DELETE CASCADE,
    redirect_uri   text        NOT NULL,
    code_challenge text        NOT NULL,
    expires_at     timestamptz NOT NULL,
    used_at        timestamptz
);
CREATE INDEX oauth_codes_expires_idx ON oauth_codes (expires_at);

CREATE TABLE oauth_tokens (
    id         uuid        PRIMARY KEY DEFAULT gen_random_uuid(),
    grant_id   uuid        NOT NULL REFERENCES oauth_grants (id) ON DELETE CASCADE,
    kind       text        NOT NULL,
    token_hash bytea       NOT NULL,
    scopes     text[]      NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    expires_at timestamptz NOT NULL,
    -- For refresh tokens: when it was exchanged (rotation); a second use
    -- is a replay and revokes the grant.
    used_at    timestamptz,
    revoked_at timestamptz,
    CONSTRAINT oauth_tokens_kind_check CHECK (kind IN ('access', 'refresh')),
    CONSTRAINT oauth_tokens_token_hash_key UNIQUE (token_hash)
);
CREATE INDEX oauth_tokens_grant_idx ON oauth_tokens (grant_id);
CREATE INDEX oauth_tokens_expires_idx ON oauth_tokens (expires_at);

-- +goose Down
DROP TABLE oauth_tokens;
DROP TABLE oauth_codes;
DROP TABLE oauth_grants;
DROP TABLE oauth_consents;
DROP TABLE oauth_login_requests;
DROP TABLE oauth_browser_sessions;
DROP TABLE oauth_clients;
