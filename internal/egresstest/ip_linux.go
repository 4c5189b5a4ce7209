package egresstest

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"strings"
)

// ipCmd runs `ip args...`.
func ipCmd(ctx context.Context, args ...string) error {
	out, err := exec.CommandContext(ctx, "ip", args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("ip %s: %w: %s", strings.Join(args, " "), err, bytes.TrimSpace(out))
	}
	return nil
}

// ipBatch runs many ip commands in one process, in the namespace ns ("" for
// the host's).
func ipBatch(ctx context.Context, ns string, lines []string) error {
	args := []string{"-batch", "-"}
	if ns != "" {
		args = append([]string{"-n", ns}, args...)
	}
	cmd := exec.CommandContext(ctx, "ip", args...)
	cmd.Stdin = strings.NewReader(strings.Join(lines, "\n") + "\n")
	out, err := cmd.CombinedOutput()
	if err != nil {
		where := "the host"
		if ns != "" {
			where = ns
		}
		return fmt.Errorf("ip -batch in %s: %w: %s", where, err, bytes.TrimSpace(out))
	}
	return nil
}
