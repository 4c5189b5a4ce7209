package kube

import (
	"strconv"

	"github.com/distribution/reference"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/berth-mcp/berth/internal/runtime"
)

// Paths inside the sandbox container.
const (
	agentDir     = "/berth"       // the agent binary, copied by the init container
	workspaceDir = "/workspace"   // the workspace emptyDir
	tokenDir     = "/run/berth"   // the agent token, from the Secret
	tokenKey     = "token"        // the Secret's key
	agentInImage = "/berth-agent" // where the agent image holds the binary
)

// secretName is the name of a server's token Secret.
func secretName(id string) string { return id + "-agent-token" }

// upstreamsName is the name of a server's MCP upstreams Secret.
func upstreamsName(id string) string { return id + "-mcp-upstreams" }

func sandboxLabels(spec runtime.Spec) map[string]string {
	return map[string]string{
		labelName: sandboxName, labelManagedBy: managedBy,
		labelServer: spec.ServerID, labelClient: spec.ClientID, labelOwner: spec.OwnerID,
	}
}

// podFor is the Pod of a sandbox: restricted pod security, the agent
// copied in by an init container, the workspace and /tmp on size-limited
// emptyDirs (so the root filesystem can be read-only), the token from its
// Secret, readiness from the agent's health endpoint.
func (r *Runtime) podFor(spec runtime.Spec, res corev1.ResourceRequirements) *corev1.Pod {
	no, yes := false, true
	uid := r.opts.RunAsUser
	secCtx := &corev1.SecurityContext{
		RunAsNonRoot:             &yes,
		RunAsUser:                &uid,
		RunAsGroup:               &uid,
		AllowPrivilegeEscalation: &no,
		ReadOnlyRootFilesystem:   &yes,
		Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
		SeccompProfile:           &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
	}
	grace := int64(10)
	var runtimeClass *string
	if spec.RuntimeClassName != "" {
		runtimeClass = &spec.RuntimeClassName
	}
	workspace, tmp := r.defaults.workspace, r.defaults.tmp
	env := []corev1.EnvVar{
		// The agent listens on the pod's address only, not on every
		// address of the network namespace it may share.
		{Name: "BERTH_POD_IP", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "status.podIP"}}},
		{Name: "HOME", Value: workspaceDir}, {Name: "LANG", Value: "C.UTF-8"}, {Name: "TERM", Value: "dumb"},
		{Name: "TMPDIR", Value: "/tmp"},
	}
	for _, k := range sortedKeys(spec.Env) {
		env = append(env, corev1.EnvVar{Name: k, Value: spec.Env[k]})
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: spec.ServerID, Namespace: spec.Namespace, Labels: sandboxLabels(spec)},
		Spec: corev1.PodSpec{
			RestartPolicy: corev1.RestartPolicyNever,
			// The pod's pause process is pid 1 of the sandbox's process
			// namespace, not the agent: it reaps what a command leaves
			// orphaned (the agent, as pid 1, did not, and the zombies of
			// detached commands used up the pod's process limit), and the
			// agent can die like any process, so berth sees it die.
			ShareProcessNamespace:         &yes,
			AutomountServiceAccountToken:  &no,
			EnableServiceLinks:            &no,
			TerminationGracePeriodSeconds: &grace,
			RuntimeClassName:              runtimeClass,
			SecurityContext: &corev1.PodSecurityContext{
				RunAsNonRoot: &yes, RunAsUser: &uid, RunAsGroup: &uid, FSGroup: &uid,
				SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
			},
			InitContainers: []corev1.Container{{
				Name:            "agent",
				Image:           r.opts.AgentImage,
				ImagePullPolicy: r.operatorPullPolicy(),
				Command:         []string{agentInImage, "install", agentDir},
				SecurityContext: secCtx,
				Resources:       initResources(),
				VolumeMounts:    []corev1.VolumeMount{{Name: "agent", MountPath: agentDir}},
			}},
			Containers: []corev1.Container{{
				Name:            "sandbox",
				Image:           spec.ImageTag,
				ImagePullPolicy: r.sandboxPullPolicy(spec.ImageTag),
				Command:         []string{agentDir + "/berth-agent"},
				Args: []string{
					"--listen", "$(BERTH_POD_IP):" + strconv.Itoa(agentPort), "--workspace", workspaceDir,
					"--token-file", tokenDir + "/" + tokenKey, "--upstreams-dir", runtime.UpstreamsDir,
					"--isolation", r.Info().Isolation,
				},
				WorkingDir:      workspaceDir,
				Env:             env,
				Ports:           []corev1.ContainerPort{{Name: "agent", ContainerPort: agentPort, Protocol: corev1.ProtocolTCP}},
				SecurityContext: secCtx,
				Resources:       res,
				ReadinessProbe: &corev1.Probe{
					ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{
						Path: "/api/health", Port: intstr.FromInt32(agentPort),
					}},
					PeriodSeconds: 1, FailureThreshold: 3, TimeoutSeconds: 2,
				},
				VolumeMounts: []corev1.VolumeMount{
					{Name: "agent", MountPath: agentDir, ReadOnly: true},
					{Name: "workspace", MountPath: workspaceDir},
					{Name: "tmp", MountPath: "/tmp"},
					{Name: "token", MountPath: tokenDir, ReadOnly: true},
					{Name: "upstreams", MountPath: runtime.UpstreamsDir, ReadOnly: true},
				},
			}},
			Volumes: []corev1.Volume{
				{Name: "agent", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{SizeLimit: resource.NewQuantity(256<<20, resource.BinarySI)}}},
				{Name: "workspace", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{SizeLimit: &workspace}}},
				{Name: "tmp", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{SizeLimit: &tmp}}},
				{Name: "token", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
					SecretName: secretName(spec.ServerID), DefaultMode: ptr(int32(0o400)),
				}}},
				// Upstream headers may be credentials: only the sandbox's
				// uid reads them, like the token.
				{Name: "upstreams", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
					SecretName: upstreamsName(spec.ServerID), DefaultMode: ptr(int32(0o400)),
				}}},
			},
		},
	}
	r.withEgress(pod, spec)
	return pod
}

// secretFor is the Secret holding the agent token, owned by the pod so
// that deleting the pod deletes it.
func secretFor(spec runtime.Spec, pod *corev1.Pod) *corev1.Secret {
	yes := true
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{
			Name: secretName(spec.ServerID), Namespace: spec.Namespace, Labels: sandboxLabels(spec),
			OwnerReferences: ownedBy(pod),
		},
		Type:      corev1.SecretTypeOpaque,
		Immutable: &yes,
		Data:      map[string][]byte{tokenKey: []byte(spec.AgentToken + "\n")},
	}
}

// upstreamsFor is the Secret of the sandbox's MCP upstream declarations,
// one <name>.json key each, owned by the pod like its token. A Secret,
// not a ConfigMap, because their headers may be credentials, which berth
// never stores in clear. It always exists, empty when there are none, so
// the agent's --upstreams-dir is always mounted.
func upstreamsFor(spec runtime.Spec, pod *corev1.Pod) (*corev1.Secret, error) {
	files, err := runtime.UpstreamFiles(spec.Upstreams)
	if err != nil {
		return nil, err
	}
	yes := true
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{
			Name: upstreamsName(spec.ServerID), Namespace: spec.Namespace, Labels: sandboxLabels(spec),
			OwnerReferences: ownedBy(pod),
		},
		Type:      corev1.SecretTypeOpaque,
		Immutable: &yes,
		Data:      files,
	}, nil
}

// ownedBy makes the pod the controller of an object, so that deleting
// the pod deletes it.
func ownedBy(pod *corev1.Pod) []metav1.OwnerReference {
	yes := true
	return []metav1.OwnerReference{{
		APIVersion: "v1", Kind: "Pod", Name: pod.Name, UID: pod.UID, Controller: &yes, BlockOwnerDeletion: &yes,
	}}
}

// initResources are the init container's: copying a binary needs little.
func initResources() corev1.ResourceRequirements {
	q := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("64Mi")}
	return corev1.ResourceRequirements{Requests: q, Limits: q}
}

func ptr[T any](v T) *T { return &v }

// sandboxPullPolicy is the pull policy of a sandbox's image ref (see
// Options.ImagePullPolicy): the kubelet asks the registry for a tag at
// every start, as the local runtime does, and pulls a digest once.
func (r *Runtime) sandboxPullPolicy(ref string) corev1.PullPolicy {
	if r.opts.ImagePullPolicy != "" {
		return r.opts.ImagePullPolicy
	}
	if named, err := reference.ParseDockerRef(ref); err == nil {
		if _, ok := named.(reference.Digested); ok {
			return corev1.PullIfNotPresent
		}
	}
	return corev1.PullAlways
}

// operatorPullPolicy is the pull policy of the images the operator
// configured (the agent's, the node holders' pause).
func (r *Runtime) operatorPullPolicy() corev1.PullPolicy {
	if r.opts.ImagePullPolicy != "" {
		return r.opts.ImagePullPolicy
	}
	return corev1.PullIfNotPresent
}
