-- The disk a server's sandbox takes, in bytes, as its runtime said when
-- the server was started (the local runtime's workspace volume, allocated
-- whole; the Kubernetes workspace emptyDir's size limit). A user's disk
-- quota is the sum over their live servers, counted in the start's
-- transaction under the same per-user lock as the server quota. NULL for
-- servers started before berth recorded it: the quota counts them at the
-- size a new sandbox takes.

-- +goose Up
ALTER TABLE servers ADD COLUMN disk_bytes bigint CHECK (disk_bytes >= 0);

-- +goose Down
ALTER TABLE servers DROP COLUMN disk_bytes;
