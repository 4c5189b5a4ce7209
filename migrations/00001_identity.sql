-- Identity and access: users, their API/session tokens, role bindings and
-- the audit log. Constraint names are spelled out because internal/store
-- maps them to error messages that name the offending field.

-- +goose Up
CREATE TABLE users (
    id           uuid        PRIMARY KEY DEFAULT gen_random_uuid(),
    username     text        NOT NULL,
    email        text        NOT NULL DEFAULT '',
    display_name text        NOT NULL DEFAULT '',
    groups       text[]      NOT NULL DEFAULT '{}',
    created_at   timestamptz NOT NULL DEFAULT now(),
    updated_at   timestamptz NOT NULL DEFAULT now(),
    disabled_at  timestamptz,
    CONSTRAINT users_username_key UNIQUE (username),
    -- Usernames are compared byte for byte, so they are stored lower-case.
    CONSTRAINT users_username_check CHECK (username ~ '^[a-z0-9._@-]{1,64}$')
);

CREATE TABLE session_tokens (
    id           uuid        PRIMARY KEY DEFAULT gen_random_uuid(),
    user_id      uuid        NOT NULL
        CONSTRAINT session_tokens_user_id_fkey REFERENCES users (id) ON DELETE CASCADE,
    name         text        NOT NULL DEFAULT '',
    -- SHA-256 of the token; the clear token is never stored.
    token_hash   bytea       NOT NULL,
    -- The first characters of the clear token, so people can tell tokens apart.
    token_prefix text        NOT NULL DEFAULT '',
    scopes       text[]      NOT NULL,
    created_at   timestamptz NOT NULL DEFAULT now(),
    expires_at   timestamptz,
    last_used_at timestamptz,
    revoked_at   timestamptz,
    CONSTRAINT session_tokens_token_hash_key UNIQUE (token_hash),
    CONSTRAINT session_tokens_token_hash_check CHECK (octet_length(token_hash) = 32),
    CONSTRAINT session_tokens_token_prefix_check CHECK (char_length(token_prefix) <= 12)
);

CREATE INDEX session_tokens_user_id_idx ON session_tokens (user_id, created_at DESC);

CREATE TABLE role_bindings (
    id           uuid        PRIMARY KEY DEFAULT gen_random_uuid(),
    subject_kind text        NOT NULL,
    -- A user id when subject_kind is 'user', a group name when 'group'.
    subject      text        NOT NULL,
    role         text        NOT NULL,
    -- '' binds the role in every namespace.
    namespace    text        NOT NULL DEFAULT '',
    created_at   timestamptz NOT NULL DEFAULT now(),
    created_by   text        NOT NULL DEFAULT '',
    CONSTRAINT role_bindings_subject_kind_check CHECK (subject_kind IN ('user', 'group')),
    CONSTRAINT role_bindings_subject_check CHECK (subject <> ''),
    CONSTRAINT role_bindings_role_check CHECK (role IN ('admin', 'member', 'viewer')),
    -- Also serves BindingsFor, which looks up by (subject_kind, subject).
    CONSTRAINT role_bindings_subject_role_namespace_key UNIQUE (subject_kind, subject, role, namespace)
);

-- actor_id and token_id are deliberately not foreign keys: the audit log
-- outlives the users and tokens it mentions.
CREATE TABLE audit_log (
    id          bigserial   PRIMARY KEY,
    at          timestamptz NOT NULL DEFAULT now(),
    actor_id    uuid,
    actor       text        NOT NULL DEFAULT '',
    token_id    uuid,
    action      text        NOT NULL,
    target_kind text        NOT NULL DEFAULT '',
    target_id   text        NOT NULL DEFAULT '',
    namespace   text        NOT NULL DEFAULT '',
    outcome     text        NOT NULL,
    -- Never holds secrets.
    detail      jsonb,
    CONSTRAINT audit_log_action_check CHECK (action <> ''),
    CONSTRAINT audit_log_outcome_check CHECK (outcome IN ('ok', 'denied', 'error'))
);

CREATE INDEX audit_log_actor_id_idx ON audit_log (actor_id, id DESC);
CREATE INDEX audit_log_target_id_idx ON audit_log (target_id, id DESC);
-- For retention jobs that delete by age.
CREATE INDEX audit_log_at_idx ON audit_log (at);

-- +goose Down
DROP TABLE audit_log;
DROP TABLE role_bindings;
DROP TABLE session_tokens;
DROP TABLE users;
