package kubetest

import (
	"os"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// exec and tcpSocket readiness probes; a pod of two containers is Ready
// only when both are.
func TestExecAndTCPProbes(t *testing.T) {
	e := need(t)
	t.Parallel()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	ns := e.Namespace(t, "probes")
	e.Kubelet.AddImage("kubetest/helper:1", Image{Entrypoint: []string{"/helper"}, Files: map[string]string{"/helper": self}})
	shared := []corev1.VolumeMount{{Name: "shared", MountPath: "/shared"}}
	create(t, e, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "two", Namespace: ns},
		Spec: corev1.PodSpec{
			Containers: []corev1.Container{
				{
					Name: "files", Image: "busybox",
					Command:      []string{"sh", "-c", "touch /shared/ready && exec sleep 1000"},
					VolumeMounts: shared,
					ReadinessProbe: &corev1.Probe{
						ProbeHandler:  corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"test", "-f", "/shared/ready"}}},
						PeriodSeconds: 1,
					},
				},
				{
					Name: "server", Image: "kubetest/helper:1",
					Env: []corev1.EnvVar{
						{Name: helperEnv, Value: "1"},
						{Name: "POD_IP", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "status.podIP"}}},
						{Name: "HELPER_ADDR", Value: "$(POD_IP):8081"},
					},
					ReadinessProbe: &corev1.Probe{
						ProbeHandler:  corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(8081)}},
						PeriodSeconds: 1,
					},
				},
			},
			Volumes: []corev1.Volume{{Name: "shared", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}},
		},
	})
	p := e.WaitPod(t, ns, "two", ready)
	for _, cs := range p.Status.ContainerStatuses {
		if !cs.Ready || cs.State.Running == nil {
			t.Errorf("container %s: ready %v, state %+v", cs.Name, cs.Ready, cs.State)
		}
	}
}
