-- The exec quota as leased shares (see docs/design.md, "The exec quota"):
-- each replica holds, per user, a share of MaxExecsPerUser that it hands
-- out in memory, and a row here says how many slots that is and until
-- when. Shares change when a replica needs more or gives back what it no
-- longer uses, never per command, and they change in place: no column of
-- the primary key (the only index) is updated, so the updates are HOT and
-- the table does not grow with the number of commands ever run. A HOT
-- update needs room on its row's page, and pruning the dead versions
-- there needs the page to itself for a moment: fillfactor 10 gives each
-- row (a few dozen bytes) a page of its own nearly, so neither fails when
-- several replicas write shares at once. A row
-- whose replica stopped renewing it counts for nothing once expires_at
-- passes, so a dead replica's slots come back within one lease.
--
-- exec_slots, a row inserted and deleted per command, is gone.

-- +goose Up
CREATE TABLE exec_shares (
    user_id    uuid NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    replica    text NOT NULL,
    slots      integer NOT NULL CHECK (slots >= 0),
    expires_at timestamptz NOT NULL,
    PRIMARY KEY (user_id, replica)
) WITH (fillfactor = 10);
DROP TABLE exec_slots;

-- +goose Down
CREATE TABLE exec_slots (
    id         uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    user_id    uuid NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    server_id  uuid,
    expires_at timestamptz NOT NULL
);
CREATE INDEX exec_slots_user ON exec_slots (user_id, expires_at);
DROP TABLE exec_shares;
