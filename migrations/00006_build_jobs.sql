-- Image build jobs (build_images_from_yaml): one row per image of a
-- request. The job is what callers ask about by name (get_job_status);
-- it is run by an operation of type build_image, whose lease another
-- replica takes over when the one running it dies. Only the holder of
-- that lease writes the job, so a replica that lost it cannot overwrite
-- the outcome of the one that took over.

-- +goose Up
CREATE TABLE build_jobs (
    id           uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    -- job_name also names what the runtime makes for the build (a
    -- sandbox, a Kubernetes Job), hence an RFC 1123 label.
    job_name     text NOT NULL UNIQUE CHECK (job_name ~ '^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$'),
    request_id   uuid NOT NULL,
    owner_id     uuid REFERENCES users(id) ON DELETE CASCADE,
    namespace    text NOT NULL,
    image_name   text NOT NULL,
    -- image_tag is the reference start_server takes, once built.
    image_tag    text NOT NULL DEFAULT '',
    -- spec is the checked image definition, env values left out: they
    -- may be secrets and are sealed with the server key in env_sealed.
    spec         jsonb NOT NULL,
    env_sealed   bytea,
    status       text NOT NULL DEFAULT 'SCHEDULED' CHECK (status IN ('SCHEDULED', 'RUNNING', 'SUCCEEDED', 'FAILED')),
    step         text NOT NULL DEFAULT '',
    error        text NOT NULL DEFAULT '',
    log_tail     text NOT NULL DEFAULT '',
    operation_id uuid NOT NULL REFERENCES operations(id) ON DELETE CASCADE,
    created_at   timestamptz NOT NULL DEFAULT now(),
    updated_at   timestamptz NOT NULL DEFAULT now(),
    started_at   timestamptz,
    finished_at  timestamptz
);
CREATE INDEX build_jobs_owner ON build_jobs (owner_id, created_at DESC);
CREATE INDEX build_jobs_operation ON build_jobs (operation_id);

-- +goose Down
DROP TABLE build_jobs;
