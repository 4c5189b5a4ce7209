-- Reading the audit log (AuditLog): every filter a reader may give alone
-- has an index ordered as the pages are (newest first, by id), so a page
-- reads only its own rows however long the log grows. Actor and target
-- have theirs since 00001.

-- +goose Up
CREATE INDEX audit_log_action_idx ON audit_log (action, id DESC);
CREATE INDEX audit_log_namespace_idx ON audit_log (namespace, id DESC);

-- +goose Down
DROP INDEX audit_log_namespace_idx;
DROP INDEX audit_log_action_idx;
