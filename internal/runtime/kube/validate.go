package kube

import (
	"context"
	"fmt"
	"regexp"
	"sort"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/berth-mcp/berth/internal/image"
	"github.com/berth-mcp/berth/internal/runtime"
	"github.com/berth-mcp/berth/internal/wire"
)

var rfc1123Label = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$`)

func checkLabel(field, v string) error {
	if !rfc1123Label.MatchString(v) {
		return wire.Errorf(wire.CodeBadRequest, "%s %q: want an RFC 1123 label (lower-case letters, digits and '-', at most 63, starting and ending with a letter or digit)", field, v)
	}
	return nil
}

// checkImage refuses what is no image reference, resolved as on every
// runtime (image.Normalize; the kubelet resolves the same way).
func checkImage(ref string) error {
	_, err := image.Normalize(ref)
	return err
}

// check refuses, before anything is created, a sandbox the cluster would
// not run: a bad name or image, an unknown runtime class, resources over
// the namespace's limits. Each error names the field.
func (r *Runtime) check(ctx context.Context, spec runtime.Spec, res corev1.ResourceRequirements) error {
	if err := checkLabel("server id", spec.ServerID); err != nil {
		return err
	}
	if _, err := r.lister(spec.Namespace); err != nil {
		return wire.Errorf(wire.CodeBadRequest, "%v", err)
	}
	if err := checkImage(spec.ImageTag); err != nil {
		return wire.Errorf(wire.CodeBadRequest, "image_tag: %v", err)
	}
	if spec.RuntimeClassName != "" {
		_, err := r.client.NodeV1().RuntimeClasses().Get(ctx, spec.RuntimeClassName, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return wire.Errorf(wire.CodeBadRequest, "runtime_class_name %q: the cluster has no such RuntimeClass", spec.RuntimeClassName)
		}
		if err != nil && !apierrors.IsForbidden(err) {
			// Forbidden: berth may not read runtime classes; the kubelet
			// still refuses an unknown one, later and less plainly.
			return fmt.Errorf("look up runtime class %q: %w", spec.RuntimeClassName, err)
		}
	}
	return r.checkLimitRanges(ctx, spec.Namespace, res)
}

// checkLimitRanges refuses resources above a container maximum that a
// LimitRange of the namespace sets.
func (r *Runtime) checkLimitRanges(ctx context.Context, ns string, res corev1.ResourceRequirements) error {
	ranges, err := r.client.CoreV1().LimitRanges(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		if apierrors.IsForbidden(err) {
			return nil // berth may not read them; admission still enforces them
		}
		return fmt.Errorf("read the limit ranges of %s: %w", ns, err)
	}
	for _, lr := range ranges.Items {
		for _, item := range lr.Spec.Limits {
			if item.Type != corev1.LimitTypeContainer {
				continue
			}
			for name, max := range item.Max {
				if want, ok := res.Limits[name]; ok && want.Cmp(max) > 0 {
					return wire.Errorf(wire.CodeBadRequest, "resources.%s %s is over the maximum %s of namespace %s (LimitRange %s)", name, want.String(), max.String(), ns, lr.Name)
				}
			}
		}
	}
	return nil
}

// resourcesFor applies a start request's resources over the defaults:
// requests equal limits, so a sandbox gets what it asks for.
func (r *Runtime) resourcesFor(spec runtime.Spec) (corev1.ResourceRequirements, error) {
	cpu, mem := r.defaults.cpu, r.defaults.memory
	for _, f := range []struct {
		name, value string
		into        *resource.Quantity
	}{{"cpu", spec.Resources.CPU, &cpu}, {"memory", spec.Resources.Memory, &mem}} {
		if f.value == "" {
			continue
		}
		q, err := resource.ParseQuantity(f.value)
		if err != nil || q.Sign() <= 0 {
			return corev1.ResourceRequirements{}, wire.Errorf(wire.CodeBadRequest, "resources.%s %q: want a positive Kubernetes quantity", f.name, f.value)
		}
		*f.into = q
	}
	l := corev1.ResourceList{corev1.ResourceCPU: cpu, corev1.ResourceMemory: mem}
	return corev1.ResourceRequirements{Requests: l, Limits: l}, nil
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
