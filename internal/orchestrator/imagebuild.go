package orchestrator

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/berth-mcp/berth/internal/runtime"
	"github.com/berth-mcp/berth/internal/store"
	"github.com/berth-mcp/berth/internal/wire"
)

// opBuildImage runs one build job.
const opBuildImage = "build_image"

// execBuild runs a build job's build through the runtime and records its
// outcome in the job. It writes the job only while this attempt holds the
// operation's lease, so a replica that lost it (and whose build was
// taken over) changes nothing.
func (s *Service) execBuild(ctx context.Context, op store.Operation) (any, error) {
	var params buildParams
	if err := json.Unmarshal(op.Params, &params); err != nil {
		return nil, fmt.Errorf("operation %s: bad params: %w", op.ID, err)
	}
	job, err := s.store.BuildJobByName(ctx, params.JobName)
	if err != nil {
		return nil, err
	}
	if !job.Active() {
		// It ended, and the replica that ended it died before it could
		// record its operation's end.
		return jobOutcome(job)
	}
	builder, err := s.imageBuilder()
	if err != nil {
		return nil, err
	}
	var spec ImageSpec
	if err := json.Unmarshal(job.Spec, &spec); err != nil {
		return nil, fmt.Errorf("build job %s: bad spec: %w", job.JobName, err)
	}
	var env map[string]string
	if err := s.unseal(job.EnvSealed, &env); err != nil {
		return nil, fmt.Errorf("build job %s env: %w", job.JobName, err)
	}
	holder := store.LeaseHolder(s.cfg.ReplicaID, op.Attempts)
	setStep := func(step string) {
		if _, err := s.store.SetBuildStep(ctx, job.ID, holder, step); err != nil && ctx.Err() == nil {
			s.log.Warn("record a build's step", "job", job.JobName, "err", err)
		}
	}
	first := "waiting for a build slot"
	if op.Attempts > 1 {
		first = fmt.Sprintf("taken over (attempt %d) after the replica running it stopped; building again from %s", op.Attempts, spec.Base)
	}
	// RUNNING from here, waiting for a slot included, so that its steps
	// are recorded.
	if ok, err := s.store.StartBuildJob(ctx, job.ID, holder, first); err != nil || !ok {
		return nil, errors.Join(err, fmt.Errorf("build job %s: this replica no longer holds it", job.JobName))
	}
	select {
	case s.builds <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	defer func() { <-s.builds }()

	timeout := s.cfg.BuildTimeout
	if spec.TimeoutSeconds > 0 {
		timeout = time.Duration(spec.TimeoutSeconds) * time.Second
	}
	bctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	res, buildErr := builder.BuildImage(bctx, runtime.ImageBuild{
		ID: job.JobName, Namespace: job.Namespace, OwnerID: job.OwnerID, Name: spec.Name, Base: spec.Base,
		Commands: spec.Commands, Env: env, Files: spec.Files, RuntimeClassName: spec.RuntimeClassName,
		Resources: runtime.Resources{CPU: spec.Resources.CPU, Memory: spec.Resources.Memory},
		Step:      setStep,
	})
	if ctx.Err() != nil {
		// Shutting down, or the lease was lost: the build is another
		// replica's to finish now.
		return nil, ctx.Err()
	}
	status, tag, msg, log := store.BuildSucceeded, res.Image, "", res.Log
	var failed *runtime.BuildFailed
	if buildErr != nil {
		status, tag, msg = store.BuildFailed, "", buildErr.Error()
		switch {
		case errors.As(buildErr, &failed):
			log = failed.Log
		case errors.Is(buildErr, context.DeadlineExceeded):
			msg = fmt.Sprintf("the build ran longer than its %s and was stopped", timeout)
		}
	}
	bg := context.WithoutCancel(ctx)
	if ok, ferr := s.store.FinishBuildJob(bg, job.ID, holder, status, tag, msg, log); ferr != nil || !ok {
		return nil, errors.Join(ferr, fmt.Errorf("build job %s: this replica no longer holds it", job.JobName))
	}
	if job, err = s.store.BuildJobByName(bg, job.JobName); err != nil {
		return nil, err
	}
	if buildErr != nil && failed == nil && !errors.Is(buildErr, context.DeadlineExceeded) {
		// Not the build's commands but the runtime: keep its code.
		return nil, fmt.Errorf("build job %s failed: %w", job.JobName, buildErr)
	}
	return jobOutcome(job)
}

// jobOutcome is an ended job as its operation's outcome: the job as the
// result, or the build's failure, which is the caller's to fix.
func jobOutcome(job store.BuildJob) (any, error) {
	if job.Status == store.BuildFailed {
		return nil, wire.Errorf(wire.CodeBadRequest, "build job %s failed: %s", job.JobName, job.Error)
	}
	return buildJobView(job), nil
}
