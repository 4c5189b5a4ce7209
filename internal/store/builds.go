package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// Build job statuses.
const (
	BuildScheduled = "SCHEDULED"
	BuildRunning   = "RUNNING"
	BuildSucceeded = "SUCCEEDED"
	BuildFailed    = "FAILED"
)

// BuildJob is a row of build_jobs.
type BuildJob struct {
	ID, JobName, RequestID, OwnerID, Namespace string
	ImageName, ImageTag                        string
	// Spec is the checked image definition (JSON), without env values.
	Spec        []byte
	EnvSealed   []byte
	Status      string
	Step        string
	Error       string
	LogTail     string
	OperationID string
	CreatedAt   time.Time
	UpdatedAt   time.Time
	StartedAt   *time.Time
	FinishedAt  *time.Time
}

// Active reports whether the job has not ended.
func (j BuildJob) Active() bool { return j.Status == BuildScheduled || j.Status == BuildRunning }

// orphaned is true for a job whose operation ended without its executor
// (attempts used up, stuck, taken over when it may not run twice): the
// job then ended with the operation, with the operation's error.
const orphaned = `(j.status IN ('SCHEDULED', 'RUNNING') AND o.status IN ('FAILED', 'CANCELLED'))`

const buildJobColumns = `j.id::text, j.job_name, j.request_id::text, coalesce(j.owner_id::text, ''), j.namespace,
	j.image_name, j.image_tag, j.spec, j.env_sealed,
	CASE WHEN ` + orphaned + ` THEN 'FAILED' ELSE j.status END, j.step,
	CASE WHEN ` + orphaned + ` THEN o.error ELSE j.error END,
	j.log_tail, j.operation_id::text, j.created_at,
	CASE WHEN ` + orphaned + ` THEN greatest(j.updated_at, o.updated_at) ELSE j.updated_at END,
	j.started_at,
	CASE WHEN ` + orphaned + ` THEN o.finished_at ELSE j.finished_at END`

const buildJobFrom = ` FROM build_jobs j JOIN operations o ON o.id = j.operation_id`

func scanBuildJob(row pgx.Row) (BuildJob, error) {
	var j BuildJob
	err := row.Scan(&j.ID, &j.JobName, &j.RequestID, &j.OwnerID, &j.Namespace, &j.ImageName, &j.ImageTag, &j.Spec, &j.EnvSealed,
		&j.Status, &j.Step, &j.Error, &j.LogTail, &j.OperationID, &j.CreatedAt, &j.UpdatedAt, &j.StartedAt, &j.FinishedAt)
	return j, err
}

// NewBuildJob is a build job to insert.
type NewBuildJob struct {
	JobName, RequestID, OwnerID, Namespace, ImageName, OperationID string
	Spec                                                           []byte
	EnvSealed                                                      []byte
}

// InsertBuildJob inserts a job inside tx, after its operation.
func InsertBuildJob(ctx context.Context, tx pgx.Tx, n NewBuildJob) error {
	_, err := tx.Exec(ctx, `INSERT INTO build_jobs (job_name, request_id, owner_id, namespace, image_name, spec, env_sealed, operation_id)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`,
		n.JobName, n.RequestID, nullUUID(n.OwnerID), n.Namespace, n.ImageName, n.Spec, n.EnvSealed, n.OperationID)
	if err != nil {
		return fmt.Errorf("insert build job %s: %w", n.JobName, mapError(err))
	}
	return nil
}

// BuildJobByName returns one job.
func (s *Store) BuildJobByName(ctx context.Context, name string) (BuildJob, error) {
	j, err := scanBuildJob(s.Pool.QueryRow(ctx, `SELECT `+buildJobColumns+buildJobFrom+` WHERE j.job_name = $1`, name))
	if err != nil {
		return BuildJob{}, rowError(err, "build job", name)
	}
	return j, nil
}

// BuildJobActive reports whether a job of that name exists and has not
// ended.
func (s *Store) BuildJobActive(ctx context.Context, name string) (bool, error) {
	j, err := s.BuildJobByName(ctx, name)
	if err == nil {
		return j.Active(), nil
	}
	if errors.Is(err, ErrNotFound) {
		return false, nil
	}
	return false, err
}

// leaseHeld is the condition under which a build's executor may write its
// job: the job's operation is still held by that attempt.
const leaseHeld = ` AND EXISTS (SELECT 1 FROM operations o WHERE o.id = build_jobs.operation_id
	AND o.lease_owner = $2 AND o.status = 'IN_PROGRESS')`

// StartBuildJob marks a job running for the attempt holding its
// operation's lease (holder as LeaseHolder names it), with what it does
// first. It reports false when that attempt no longer holds the lease.
func (s *Store) StartBuildJob(ctx context.Context, id, holder, step string) (bool, error) {
	return s.updateBuildJob(ctx, `UPDATE build_jobs SET status = 'RUNNING', step = $3, error = '', updated_at = now(),
		started_at = coalesce(started_at, now()) WHERE id = $1`+leaseHeld, id, holder, step)
}

// SetBuildStep records what a running job does now.
func (s *Store) SetBuildStep(ctx context.Context, id, holder, step string) (bool, error) {
	return s.updateBuildJob(ctx, `UPDATE build_jobs SET step = $3, updated_at = now()
		WHERE id = $1 AND status = 'RUNNING'`+leaseHeld, id, holder, step)
}

// FinishBuildJob records a job's outcome (BuildSucceeded with the image
// tag, or BuildFailed with the error) and the end of its log.
func (s *Store) FinishBuildJob(ctx context.Context, id, holder, status, imageTag, errMsg, logTail string) (bool, error) {
	return s.updateBuildJob(ctx, `UPDATE build_jobs SET status = $3, image_tag = $4, error = $5, log_tail = $6, step = '',
		updated_at = now(), finished_at = now() WHERE id = $1`+leaseHeld, id, holder, status, imageTag, errMsg, logTail)
}

func (s *Store) updateBuildJob(ctx context.Context, sql string, args ...any) (bool, error) {
	tag, err := s.Pool.Exec(ctx, sql, args...)
	if err != nil {
		return false, fmt.Errorf("build job %v: %w", args[0], mapError(err))
	}
	return tag.RowsAffected() == 1, nil
}
