package orchestrator

import (
	"context"
	"slices"

	"github.com/berth-mcp/berth/internal/rbac"
	"github.com/berth-mcp/berth/internal/wire"
)

// BuildImagesRequest is IdeGYM's build_images_from_yaml.
type BuildImagesRequest struct {
	YAML      string `json:"yaml" jsonschema:"image-builder YAML describing the images to build"`
	Namespace string `json:"namespace,omitempty" jsonschema:"namespace to build in (default: default)"`
}

// JobStatusRequest asks for an image build job.
type JobStatusRequest struct {
	JobName string `json:"job_name" jsonschema:"the build job's name"`
}

// BuildImages starts image builds. Builds run as Kaniko jobs on the
// Kubernetes runtime; other runtimes answer plainly that they cannot.
func (s *Service) BuildImages(ctx context.Context, p rbac.Principal, req BuildImagesRequest) (Operation, error) {
	ns := req.Namespace
	if ns == "" {
		ns = s.cfg.DefaultNamespace
	}
	if err := s.authorize(ctx, p, rbac.ActionImageBuild, rbac.Resource{Kind: "image", Namespace: ns}, ""); err != nil {
		return Operation{}, err
	}
	if !slices.Contains(s.rt.Info().Features, "image-build") {
		return Operation{}, wire.Errorf(wire.CodeNotImplemented,
			"image builds need the Kubernetes runtime (Kaniko jobs); the %s runtime uses workspace templates: put files under <data-dir>/images/<tag>", s.rt.Info().Name)
	}
	return Operation{}, wire.Errorf(wire.CodeNotImplemented, "image builds are not available in this build")
}

// GetJobStatus reports an image build job.
func (s *Service) GetJobStatus(ctx context.Context, p rbac.Principal, req JobStatusRequest) (Operation, error) {
	if err := requireScope(p, rbac.ActionOperationRead); err != nil {
		return Operation{}, err
	}
	if !slices.Contains(s.rt.Info().Features, "image-build") {
		return Operation{}, wire.Errorf(wire.CodeNotImplemented, "no build jobs: the %s runtime does not build images", s.rt.Info().Name)
	}
	return Operation{}, wire.Errorf(wire.CodeNotFound, "build job %q not found", req.JobName)
}
