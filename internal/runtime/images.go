package runtime

import "context"

// ImageBuilder is implemented by runtimes that build images
// (build_images_from_yaml): the local runtime adds a layer of what a
// sandbox of the base image wrote (or, over the host system, keeps its
// workspace as a template), the Kubernetes runtime runs a Kaniko Job.
//
// A build is durable without this interface keeping anything in memory:
// the orchestrator records it in PostgreSQL as a job run by a leased
// operation, and when the replica running it dies another replica calls
// BuildImage again with the same ID. What the runtime made for the build
// is named after that ID, so the second call finds it.
type ImageBuilder interface {
	// BuildImage runs the build to its end and returns what it made. A
	// build that ran and failed (a command exited non-zero, the result
	// could not be kept) returns a *BuildFailed; any other error means
	// the build could not be run at all.
	//
	// It is idempotent per ID: called again with an ID whose build is
	// still under way (its first caller died), it either waits for that
	// build (a Kubernetes Job goes on without berth) or starts it again
	// from Base (the local runtime's build was driven by the caller that
	// died), and never runs two at once for one ID. The image Name is
	// replaced only when a build succeeds; a failed one leaves the
	// previous image as it was.
	//
	// When ctx ends BuildImage returns ctx's error; resources of the
	// build it could not remove are left for the next call with the ID or
	// for the orchestrator's reconciliation.
	BuildImage(ctx context.Context, b ImageBuild) (BuildResult, error)
}

// ImageBuild is one image to build: Files written into the workspace,
// then Commands run in order, each in its own shell in the workspace
// directory, with Env set, on top of Base; the result is the image Name.
type ImageBuild struct {
	// ID names the build, an RFC 1123 label of at most 63 characters.
	// Runtimes derive the names of everything the build makes from it.
	// A runtime whose builds run in sandboxes names the build's sandbox
	// ID, so List reports it: the orchestrator leaves such a sandbox
	// alone while its build job is active and deletes it once the job
	// ended.
	ID string
	// Namespace and OwnerID say whose build it is, as in Spec.
	Namespace string
	OwnerID   string
	// Name is the image to make: a lowercase name of letters, digits,
	// '.', '_' and '-', at most 63 characters: a repository name under
	// the operator's registry (berth.local without one, on the local
	// runtime), or a template directory name for a local build over the
	// host system.
	Name string
	// Base is what the build starts from: an image reference, or on the
	// local runtime the name of an image it built, host, base, or a
	// workspace template (the host system, with the template's files).
	Base     string
	Commands []string
	// Env is the build's environment. Values may be secrets:
	// implementations keep them out of logs, Dockerfiles and Job specs.
	Env map[string]string
	// Files are written into the workspace before the first command.
	Files            []File
	RuntimeClassName string
	Resources        Resources
	// Step, when set, is told in one line what the build does now ("2/3
	// make install"), so callers asking about the build see it. It may be
	// called from any goroutine and must not block for long.
	Step func(string)
}

// File is a file to write into a build's workspace.
type File struct {
	// Path is relative to the workspace, clean, without "..".
	Path    string `json:"path"`
	Content string `json:"content"`
}

// BuildResult is what a build made.
type BuildResult struct {
	// Image is the reference start_server takes to start from the image:
	// registry/name:<build id> when the image was pushed (always on
	// Kubernetes), berth.local/name:<build id> for one the local runtime
	// keeps in its cache only, the name of a local template.
	Image string
	// Log is the end of the build's output, at most MaxBuildLog bytes.
	Log string
}

// BuildFailed is the error of a build that ran and failed.
type BuildFailed struct {
	// Reason says what failed in plain words: which command, its exit
	// status and the end of its output.
	Reason string
	// Log is the end of the build's output, at most MaxBuildLog bytes.
	Log string
}

func (e *BuildFailed) Error() string { return e.Reason }

// MaxBuildLog bounds the log a build reports.
const MaxBuildLog = 16 << 10
