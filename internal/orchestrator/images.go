package orchestrator

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/berth-mcp/berth/internal/rbac"
	"github.com/berth-mcp/berth/internal/runtime"
	"github.com/berth-mcp/berth/internal/store"
	"github.com/berth-mcp/berth/internal/wire"
)

// BuildImagesRequest is IdeGYM's build_images_from_yaml.
type BuildImagesRequest struct {
	YAMLContent string  `json:"yaml_content,omitempty" jsonschema:"image-builder YAML: images: [{name, base, commands, env, files, runtime_class_name, resources, timeout_seconds}] (see docs/mcp.md)"`
	YAML        string  `json:"yaml,omitempty" jsonschema:"the same as yaml_content (berth's earlier name for it)"`
	Namespace   string  `json:"namespace,omitempty" jsonschema:"namespace the builds run in and belong to (default: default)"`
	WaitSeconds float64 `json:"wait_seconds,omitempty" jsonschema:"wait up to this many seconds (max 300) for every build to finish and return the jobs as they then are"`
}

// BuildImagesResult is build_images_from_yaml's answer: IdeGYM's
// job_names, one per image in the order of the YAML, and the jobs as
// they are when the call returns.
type BuildImagesResult struct {
	JobNames  []string   `json:"job_names"`
	RequestID string     `json:"request_id"`
	Jobs      []BuildJob `json:"jobs"`
}

// JobStatusRequest asks for an image build job.
type JobStatusRequest struct {
	JobName     string  `json:"job_name" jsonschema:"the build job's name, from build_images_from_yaml's job_names"`
	WaitSeconds float64 `json:"wait_seconds,omitempty" jsonschema:"wait up to this many seconds (max 300) for the job to finish"`
}

// IdeGYM's build job statuses.
const (
	JobInProgress = "in_progress"
	JobSuccess    = "success"
	JobFailure    = "failure"
)

// BuildJob is get_job_status's answer: IdeGYM's JobStatusResponse fields
// (job_name, status, tag, details, request_id, created_at and updated_at
// in epoch milliseconds) and berth's.
type BuildJob struct {
	JobName string `json:"job_name"`
	// Status is IdeGYM's: in_progress, success or failure.
	Status string `json:"status"`
	// State is berth's finer one: SCHEDULED, RUNNING, SUCCEEDED, FAILED.
	State string `json:"state"`
	// Tag is the image_tag start_server takes, once the build succeeded.
	Tag string `json:"tag,omitempty"`
	// Details says what a running build does now, or why a failed one
	// failed (the command, its exit status, the end of its output).
	Details string `json:"details,omitempty"`
	// LogTail is the end of the build's output.
	LogTail     string `json:"log_tail,omitempty"`
	Image       string `json:"image"`
	Base        string `json:"base"`
	Namespace   string `json:"namespace"`
	RequestID   string `json:"request_id"`
	OperationID string `json:"operation_id"`
	CreatedAt   int64  `json:"created_at"`
	UpdatedAt   int64  `json:"updated_at"`
	StartedAt   int64  `json:"started_at,omitempty"`
	FinishedAt  int64  `json:"finished_at,omitempty"`
}

// imageBuilder returns the runtime's image builder, or a not_implemented
// error naming the runtime.
func (s *Service) imageBuilder() (runtime.ImageBuilder, error) {
	b, ok := runtime.As[runtime.ImageBuilder](s.rt)
	if !ok {
		return nil, wire.Errorf(wire.CodeNotImplemented, "the %s runtime does not build images", s.rt.Info().Name)
	}
	return b, nil
}

// BuildImages checks an image-builder YAML and records one build job per
// image, each run by an operation. The operations run on this replica
// when its Run is running (builds take long, and would otherwise hold
// the workers other operations need), else on any replica's workers;
// either way another replica takes a build over when this one dies.
//
// An image name is one for the whole berth (a cached image or template of the
// local runtime, a repository of the operator's registry), so a build
// replaces what every namespace starts from: it needs a global admin.
func (s *Service) BuildImages(ctx context.Context, p rbac.Principal, req BuildImagesRequest) (BuildImagesResult, error) {
	ns := req.Namespace
	if ns == "" {
		ns = s.cfg.DefaultNamespace
	}
	if err := checkNamespace(ns); err != nil {
		return BuildImagesResult{}, err
	}
	if err := s.authorize(ctx, p, rbac.ActionImageBuild, rbac.Resource{Kind: "image"}, ""); err != nil {
		return BuildImagesResult{}, err
	}
	if _, err := s.imageBuilder(); err != nil {
		return BuildImagesResult{}, err
	}
	doc := req.YAMLContent
	switch {
	case doc == "":
		doc = req.YAML
	case req.YAML != "" && req.YAML != doc:
		return BuildImagesResult{}, wire.Errorf(wire.CodeBadRequest, "yaml and yaml_content differ: give one of them")
	}
	if strings.TrimSpace(doc) == "" {
		return BuildImagesResult{}, wire.Errorf(wire.CodeBadRequest, "yaml_content is required: images: [{name, base, commands, ...}]")
	}
	specs, err := ParseImageSpecs(doc)
	if err != nil {
		return BuildImagesResult{}, err
	}
	if err := checkWait(req.WaitSeconds); err != nil {
		return BuildImagesResult{}, err
	}
	requestID := uuid.NewString()
	claim := s.inlineReplica()
	names := make([]string, len(specs))
	ops := make([]store.Operation, len(specs))
	err = s.store.InTx(ctx, func(tx pgx.Tx) error {
		for i, spec := range specs {
			if ops[i], names[i], err = s.insertBuild(ctx, tx, p, ns, requestID, claim, spec); err != nil {
				return err
			}
		}
		return nil
	})
	images := make([]string, len(specs))
	for i, spec := range specs {
		images[i] = spec.Name
	}
	s.audit(ctx, p, "image.build", "image", requestID, ns, outcome(err), map[string]any{"images": images, "job_names": names})
	if err != nil {
		return BuildImagesResult{}, err
	}
	s.runBuilds(ctx, ops, req.WaitSeconds)
	res := BuildImagesResult{JobNames: names, RequestID: requestID, Jobs: make([]BuildJob, len(names))}
	for i, name := range names {
		j, err := s.store.BuildJobByName(ctx, name)
		if err != nil {
			return BuildImagesResult{}, err
		}
		res.Jobs[i] = buildJobView(j)
	}
	return res, nil
}

// buildParams are a build_image operation's parameters.
type buildParams struct {
	JobName string `json:"job_name"`
}

// insertBuild records one image's job and the operation that runs it.
func (s *Service) insertBuild(ctx context.Context, tx pgx.Tx, p rbac.Principal, ns, requestID, claim string, spec ImageSpec) (store.Operation, string, error) {
	var sealed []byte
	if len(spec.Env) > 0 {
		var err error
		if sealed, err = s.seal(spec.Env); err != nil {
			return store.Operation{}, "", fmt.Errorf("seal env: %w", err)
		}
	}
	name := jobName(spec.Name)
	params, _ := json.Marshal(buildParams{JobName: name})
	op, err := store.InsertOperation(ctx, tx, store.NewOperation{Type: opBuildImage, OwnerID: p.UserID, Namespace: ns, Params: params,
		ClaimFor: claim, Lease: s.cfg.OperationLease})
	if err != nil {
		return store.Operation{}, "", err
	}
	b, err := json.Marshal(spec)
	if err != nil {
		return store.Operation{}, "", err
	}
	err = store.InsertBuildJob(ctx, tx, store.NewBuildJob{JobName: name, RequestID: requestID, OwnerID: p.UserID, Namespace: ns,
		ImageName: spec.Name, OperationID: op.ID, Spec: b, EnvSealed: sealed})
	return op, name, err
}

// runBuilds starts the builds claimed for this replica and waits up to
// waitSeconds for all of them; the others are the workers'.
func (s *Service) runBuilds(ctx context.Context, ops []store.Operation, waitSeconds float64) {
	var done []<-chan struct{}
	var queued []store.Operation
	for _, op := range ops {
		if op.Status != OpInProgress {
			queued = append(queued, op)
			continue
		}
		if run := s.runInline(op, store.Server{}); run != nil {
			done = append(done, run.done)
		}
	}
	if len(queued) > 0 {
		s.wake()
	}
	if waitSeconds <= 0 {
		return
	}
	end := time.Now().Add(time.Duration(waitSeconds * float64(time.Second)))
	timer := time.NewTimer(time.Until(end))
	defer timer.Stop()
	for _, d := range done {
		select {
		case <-d:
		case <-timer.C:
			return
		case <-ctx.Done():
			return
		}
	}
	for _, op := range queued {
		left := time.Until(end).Seconds()
		if left <= 0 {
			return
		}
		if _, err := s.waitOperation(ctx, op, left); err != nil {
			return
		}
	}
}

// jobName names a build job after its image, with a random suffix: an
// RFC 1123 label, as it names the runtime's resources of the build too.
func jobName(image string) string {
	base := strings.Map(func(r rune) rune {
		if r == '.' || r == '_' {
			return '-'
		}
		return r
	}, image)
	if len(base) > 48 {
		base = base[:48]
	}
	base = strings.Trim(base, "-")
	const alphabet = "abcdefghijklmnopqrstuvwxyz0123456789"
	suffix := make([]byte, 6)
	rand.Read(suffix)
	for i, b := range suffix {
		suffix[i] = alphabet[int(b)%len(alphabet)]
	}
	return buildSandboxPrefix + base + "-" + string(suffix)
}

// buildSandboxPrefix begins the name of every build job and of the
// sandbox it runs in, which is no server's (server ids are UUIDs).
const buildSandboxPrefix = "build-"

// GetJobStatus reports an image build job; with WaitSeconds it waits up
// to that long for the job to finish.
func (s *Service) GetJobStatus(ctx context.Context, p rbac.Principal, req JobStatusRequest) (BuildJob, error) {
	if err := requireScope(p, rbac.ActionOperationRead); err != nil {
		return BuildJob{}, err
	}
	if _, err := s.imageBuilder(); err != nil {
		return BuildJob{}, err
	}
	if err := checkWait(req.WaitSeconds); err != nil {
		return BuildJob{}, err
	}
	if !namespaceRE.MatchString(req.JobName) {
		return BuildJob{}, wire.Errorf(wire.CodeNotFound, "build job %q not found", req.JobName)
	}
	j, err := s.store.BuildJobByName(ctx, req.JobName)
	if err != nil {
		return BuildJob{}, err
	}
	if err := rbac.Authorize(p, rbac.ActionOperationRead, rbac.Resource{Kind: "build job", Namespace: j.Namespace, OwnerID: j.OwnerID}); err != nil {
		return BuildJob{}, err
	}
	if req.WaitSeconds > 0 && j.Active() {
		op, err := s.store.OperationByID(ctx, j.OperationID)
		if err != nil {
			return BuildJob{}, err
		}
		if _, err := s.waitOperation(ctx, op, req.WaitSeconds); err != nil {
			return BuildJob{}, err
		}
		if j, err = s.store.BuildJobByName(ctx, req.JobName); err != nil {
			return BuildJob{}, err
		}
	}
	return buildJobView(j), nil
}

func buildJobView(j store.BuildJob) BuildJob {
	var spec ImageSpec
	json.Unmarshal(j.Spec, &spec)
	v := BuildJob{
		JobName: j.JobName, State: j.Status, Tag: j.ImageTag, Details: j.Step, LogTail: j.LogTail,
		Image: j.ImageName, Base: spec.Base, Namespace: j.Namespace, RequestID: j.RequestID, OperationID: j.OperationID,
		CreatedAt: j.CreatedAt.UnixMilli(), UpdatedAt: j.UpdatedAt.UnixMilli(),
	}
	switch j.Status {
	case store.BuildSucceeded:
		v.Status = JobSuccess
	case store.BuildFailed:
		v.Status, v.Details = JobFailure, j.Error
	default:
		v.Status = JobInProgress
	}
	if j.StartedAt != nil {
		v.StartedAt = j.StartedAt.UnixMilli()
	}
	if j.FinishedAt != nil {
		v.FinishedAt = j.FinishedAt.UnixMilli()
	}
	return v
}
