package kube

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path"
	"sort"
	"strings"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/berth-mcp/berth/internal/runtime"
)

var _ runtime.ImageBuilder = (*Runtime)(nil)

// Image builds run as Kaniko Jobs: the Dockerfile and the files to copy
// in a ConfigMap, the build's environment in a Secret sourced by each RUN
// (so no value is in the Dockerfile, the Job spec or a log), registry
// credentials from a Secret the operator names, mounted where Kaniko
// reads them. Everything is named after the build ID, so a replica that
// takes a build over finds the Job of the one that died and waits for it.
const (
	// DefaultKanikoImage is the executor the Jobs run.
	DefaultKanikoImage = "gcr.io/kaniko-project/executor:v1.23.2"
	labelBuild         = "berth.dev/build"
	// Under /kaniko, which Kaniko leaves out of the image it builds, so
	// the image's own /workspace is free for the build.
	contextDir      = "/kaniko/berth-context"
	buildEnvDir     = "/kaniko/berth-env"
	dockerConfigDir = "/kaniko/.docker"
)

// BuildImage implements runtime.ImageBuilder.
func (r *Runtime) BuildImage(ctx context.Context, b runtime.ImageBuild) (runtime.BuildResult, error) {
	if r.opts.ImageRegistry == "" {
		return runtime.BuildResult{}, errors.New("image builds on Kubernetes need a registry to push to (--image-registry)")
	}
	if err := checkLabel("build id", b.ID); err != nil {
		return runtime.BuildResult{}, err
	}
	if err := checkImage(b.Base); err != nil {
		return runtime.BuildResult{}, fmt.Errorf("base: %w", err)
	}
	if _, err := r.lister(b.Namespace); err != nil {
		return runtime.BuildResult{}, err
	}
	repo := strings.TrimSuffix(r.opts.ImageRegistry, "/") + "/" + b.Name
	image := repo + ":" + b.ID
	if err := checkImage(image); err != nil {
		return runtime.BuildResult{}, fmt.Errorf("image: %w", err)
	}
	step(b, "starting the Kaniko job")
	job, err := r.ensureBuildJob(ctx, b, image, repo+":latest")
	if err != nil {
		return runtime.BuildResult{}, err
	}
	step(b, "building in job "+job.Name)
	done, err := r.waitJob(ctx, b.Namespace, job.Name)
	// The environment may hold secrets: it goes as soon as the build does.
	r.client.CoreV1().Secrets(b.Namespace).Delete(context.WithoutCancel(ctx), buildEnvName(b.ID), metav1.DeleteOptions{})
	if err != nil {
		return runtime.BuildResult{}, err
	}
	log := r.jobLog(ctx, b.Namespace, job.Name)
	if !done.ok {
		return runtime.BuildResult{}, &runtime.BuildFailed{Reason: "the Kaniko job failed: " + done.reason, Log: log}
	}
	return runtime.BuildResult{Image: image, Log: log}, nil
}

func step(b runtime.ImageBuild, s string) {
	if b.Step != nil {
		b.Step(s)
	}
}

func buildEnvName(id string) string { return id + "-env" }

// ensureBuildJob creates the build's Job, then its ConfigMap and Secret
// owned by it, or finds them made by an earlier attempt.
func (r *Runtime) ensureBuildJob(ctx context.Context, b runtime.ImageBuild, destinations ...string) (*batchv1.Job, error) {
	jobs := r.client.BatchV1().Jobs(b.Namespace)
	job, err := jobs.Create(ctx, r.buildJob(b, destinations), metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		// An earlier attempt started it: its build goes on without berth.
		return jobs.Get(ctx, b.ID, metav1.GetOptions{})
	}
	if err != nil {
		return nil, fmt.Errorf("create build job %s: %w", b.ID, err)
	}
	owner := []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "Job", Name: job.Name, UID: job.UID, Controller: ptr(true)}}
	labels := map[string]string{labelManagedBy: managedBy, labelBuild: b.ID}
	dockerfile, files := dockerfileFor(b)
	files["Dockerfile"] = dockerfile
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: b.ID, Namespace: b.Namespace, Labels: labels, OwnerReferences: owner}, Data: files}
	if _, err := r.client.CoreV1().ConfigMaps(b.Namespace).Create(ctx, cm, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, fmt.Errorf("build context of %s: %w", b.ID, err)
	}
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: buildEnvName(b.ID), Namespace: b.Namespace, Labels: labels, OwnerReferences: owner},
		Type:       corev1.SecretTypeOpaque,
		Data:       map[string][]byte{"env": []byte(envFile(b.Env))},
	}
	if _, err := r.client.CoreV1().Secrets(b.Namespace).Create(ctx, secret, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, fmt.Errorf("build environment of %s: %w", b.ID, err)
	}
	return job, nil
}

// dockerfileFor writes the build as a Dockerfile: the files copied from
// the build context (ConfigMap keys file-N), then each command as a RUN in
// bash with the build's environment sourced from its Secret.
func dockerfileFor(b runtime.ImageBuild) (string, map[string]string) {
	var df strings.Builder
	fmt.Fprintf(&df, "FROM %s\n", b.Base)
	files := map[string]string{}
	for i, f := range b.Files {
		key := fmt.Sprintf("file-%d", i)
		files[key] = f.Content
		dest, _ := json.Marshal([]string{key, path.Join("/workspace", f.Path)})
		fmt.Fprintf(&df, "COPY %s\n", dest)
	}
	df.WriteString("WORKDIR /workspace\n")
	for _, cmd := range b.Commands {
		script := "set -e; set -a; . " + buildEnvDir + "/env; set +a; " + cmd
		run, _ := json.Marshal([]string{"/bin/bash", "-c", script})
		fmt.Fprintf(&df, "RUN %s\n", run)
	}
	return df.String(), files
}

// envFile is the build's environment as shell assignments.
func envFile(env map[string]string) string {
	keys := make([]string, 0, len(env))
	for k := range env {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&b, "%s='%s'\n", k, strings.ReplaceAll(env[k], "'", `'\''`))
	}
	return b.String()
}

func (r *Runtime) buildJob(b runtime.ImageBuild, destinations []string) *batchv1.Job {
	labels := map[string]string{labelManagedBy: managedBy, labelBuild: b.ID}
	args := []string{"--dockerfile=Dockerfile", "--context=dir://" + contextDir}
	for _, d := range destinations {
		args = append(args, "--destination="+d)
	}
	volumes := []corev1.Volume{
		{Name: "context", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: b.ID}}}},
		{Name: "env", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: buildEnvName(b.ID)}}},
	}
	mounts := []corev1.VolumeMount{{Name: "context", MountPath: contextDir}, {Name: "env", MountPath: buildEnvDir, ReadOnly: true}}
	if r.opts.RegistrySecret != "" {
		volumes = append(volumes, corev1.Volume{Name: "registry", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
			SecretName: r.opts.RegistrySecret, Items: []corev1.KeyToPath{{Key: corev1.DockerConfigJsonKey, Path: "config.json"}},
		}}})
		mounts = append(mounts, corev1.VolumeMount{Name: "registry", MountPath: dockerConfigDir, ReadOnly: true})
	}
	res := corev1.ResourceList{corev1.ResourceCPU: r.defaults.cpu, corev1.ResourceMemory: r.defaults.memory}
	if q, err := resource.ParseQuantity(b.Resources.CPU); err == nil && b.Resources.CPU != "" {
		res[corev1.ResourceCPU] = q
	}
	if q, err := resource.ParseQuantity(b.Resources.Memory); err == nil && b.Resources.Memory != "" {
		res[corev1.ResourceMemory] = q
	}
	var runtimeClass *string
	if b.RuntimeClassName != "" {
		runtimeClass = &b.RuntimeClassName
	}
	return &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: b.ID, Namespace: b.Namespace, Labels: labels},
		Spec: batchv1.JobSpec{
			BackoffLimit:            ptr(int32(0)),
			TTLSecondsAfterFinished: ptr(int32(24 * 3600)),
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					RestartPolicy:                corev1.RestartPolicyNever,
					AutomountServiceAccountToken: ptr(false),
					EnableServiceLinks:           ptr(false),
					RuntimeClassName:             runtimeClass,
					Containers: []corev1.Container{{
						Name: "kaniko", Image: r.kanikoImage(), Args: args, VolumeMounts: mounts,
						Resources: corev1.ResourceRequirements{Requests: res, Limits: res},
						// Kaniko unpacks and runs the image as root inside its
						// container, without privileges or host access.
						SecurityContext: &corev1.SecurityContext{
							AllowPrivilegeEscalation: ptr(false),
							SeccompProfile:           &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
						},
					}},
					Volumes: volumes,
				},
			},
		},
	}
}

func (r *Runtime) kanikoImage() string {
	if r.opts.KanikoImage != "" {
		return r.opts.KanikoImage
	}
	return DefaultKanikoImage
}

type jobEnd struct {
	ok     bool
	reason string
}

// waitJob watches the Job until it completes or fails.
func (r *Runtime) waitJob(ctx context.Context, ns, name string) (jobEnd, error) {
	jobs := r.client.BatchV1().Jobs(ns)
	for {
		job, err := jobs.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return jobEnd{}, fmt.Errorf("build job %s: %w", name, err)
		}
		if end, ok := jobFinished(job); ok {
			return end, nil
		}
		w, err := jobs.Watch(ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("metadata.name", name).String(), ResourceVersion: job.ResourceVersion})
		if err != nil {
			return jobEnd{}, fmt.Errorf("watch build job %s: %w", name, err)
		}
		end, ok, err := watchJob(ctx, w)
		w.Stop()
		if err != nil || ok {
			return end, err
		}
		// The watch ended (a timeout, a compaction): look again.
	}
}

func watchJob(ctx context.Context, w watch.Interface) (jobEnd, bool, error) {
	timeout := time.After(5 * time.Minute)
	for {
		select {
		case <-ctx.Done():
			return jobEnd{}, false, ctx.Err()
		case <-timeout:
			return jobEnd{}, false, nil
		case ev, open := <-w.ResultChan():
			if !open {
				return jobEnd{}, false, nil
			}
			if ev.Type == watch.Deleted {
				return jobEnd{reason: "the job was deleted before it finished"}, true, nil
			}
			if job, isJob := ev.Object.(*batchv1.Job); isJob {
				if end, ok := jobFinished(job); ok {
					return end, true, nil
				}
			}
		}
	}
}

func jobFinished(job *batchv1.Job) (jobEnd, bool) {
	for _, c := range job.Status.Conditions {
		if c.Status != corev1.ConditionTrue {
			continue
		}
		switch c.Type {
		case batchv1.JobComplete:
			return jobEnd{ok: true}, true
		case batchv1.JobFailed:
			return jobEnd{reason: strings.TrimSpace(c.Reason + ": " + c.Message)}, true
		}
	}
	return jobEnd{}, false
}

// jobLog is the end of the build pod's log.
func (r *Runtime) jobLog(ctx context.Context, ns, job string) string {
	pods, err := r.client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "job-name=" + job})
	if err != nil || len(pods.Items) == 0 {
		return ""
	}
	opts := &corev1.PodLogOptions{Container: "kaniko", LimitBytes: ptr(int64(maxLogBytes)), TailLines: ptr(int64(200))}
	stream, err := r.client.CoreV1().Pods(ns).GetLogs(pods.Items[0].Name, opts).Stream(ctx)
	if err != nil {
		return ""
	}
	defer stream.Close()
	b, _ := io.ReadAll(io.LimitReader(stream, maxLogBytes))
	if len(b) > runtime.MaxBuildLog {
		b = b[len(b)-runtime.MaxBuildLog:]
	}
	return string(b)
}
