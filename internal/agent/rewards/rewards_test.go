package rewards

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/berth-mcp/berth/internal/agent/bash"
	"github.com/berth-mcp/berth/internal/wire"
)

func newRunner(t *testing.T) (*Runner, string) {
	t.Helper()
	ws := t.TempDir()
	return &Runner{Bash: &bash.Runner{Workspace: ws}}, ws
}

// A flat suite: 2 passed, 1 failure, 1 skipped, 1 error.
const flatSuiteCmd = `mkdir -p reports && printf '%s\n' \
 '<?xml version="1.0" encoding="UTF-8"?>' \
 '<testsuite name="unit" tests="5">' \
 '  <testcase classname="a" name="ok1"/>' \
 '  <testcase classname="a" name="ok2"><system-out>fine</system-out></testcase>' \
 '  <testcase classname="a" name="bad"><failure message="x">boom</failure></testcase>' \
 '  <testcase classname="a" name="skip"><skipped/></testcase>' \
 '  <testcase classname="a" name="err"><error type="E"/></testcase>' \
 '</testsuite>' > reports/junit-unit.xml; echo tests ran; exit 1`

func check(t *testing.T, got wire.RewardResult, total, passed, failed, skipped, errs int, reports ...string) {
	t.Helper()
	if got.Total != total || got.Passed != passed || got.Failed != failed || got.Skipped != skipped || got.Errors != errs {
		t.Errorf("counts = %d total, %d passed, %d failed, %d skipped, %d errors; want %d %d %d %d %d",
			got.Total, got.Passed, got.Failed, got.Skipped, got.Errors, total, passed, failed, skipped, errs)
	}
	if !slices.Equal(got.Reports, reports) {
		t.Errorf("reports = %q, want %q", got.Reports, reports)
	}
}

func TestCountsFromRealCommand(t *testing.T) {
	r, _ := newRunner(t)
	res, err := r.Test(context.Background(), wire.RewardRequest{Command: flatSuiteCmd, JUnitPaths: []string{"reports/*.xml"}})
	if err != nil {
		t.Fatal(err)
	}
	check(t, res, 5, 2, 1, 1, 1, "reports/junit-unit.xml")
	if res.Bash.ExitCode != 1 || res.Bash.Stdout != "tests ran\n" {
		t.Fatalf("bash result = %+v", res.Bash)
	}
}

func TestDiscoveryNestedSuitesAndFreshness(t *testing.T) {
	r, ws := newRunner(t)
	// A report from an earlier run must not be counted.
	stale := `<testsuite><testcase name="old"/></testsuite>`
	if err := os.WriteFile(filepath.Join(ws, "stale.xml"), []byte(stale), 0o644); err != nil {
		t.Fatal(err)
	}
	r.DefaultCommand = `mkdir -p build/test-results/deep && printf '%s\n' \
 '<testsuites>' \
 ' <testsuite name="outer">' \
 '  <testcase name="a"/>' \
 '  <testsuite name="inner">' \
 '   <testcase name="b"/>' \
 '   <testcase name="c"><failure/></testcase>' \
 '   <testsuite name="innermost"><testcase name="d"><skipped message="later"/></testcase></testsuite>' \
 '  </testsuite>' \
 ' </testsuite>' \
 ' <testsuite name="counted-by-attributes" tests="4" failures="1" errors="1" skipped="0"/>' \
 '</testsuites>' > build/test-results/deep/results.xml
printf '<project><name>not a report</name></project>' > pom.xml`
	res, err := r.Test(context.Background(), wire.RewardRequest{})
	if err != nil {
		t.Fatal(err)
	}
	check(t, res, 8, 4, 2, 1, 1, "build/test-results/deep/results.xml")
}

func TestDoubleStarGlobs(t *testing.T) {
	r, _ := newRunner(t)
	r.DefaultReports = []string{"**/TEST-*.xml"}
	cmd := `for d in . a a/b/c; do mkdir -p $d; printf '<testsuite><testcase name="x"/></testsuite>' > $d/TEST-x.xml; done
printf '<testsuite><testcase name="y"/></testsuite>' > a/ignored.xml`
	res, err := r.Test(context.Background(), wire.RewardRequest{Command: cmd})
	if err != nil {
		t.Fatal(err)
	}
	check(t, res, 3, 3, 0, 0, 0, "TEST-x.xml", "a/TEST-x.xml", "a/b/c/TEST-x.xml")

	// The request's globs take precedence over the configured ones.
	res, err = r.Test(context.Background(), wire.RewardRequest{Command: cmd, JUnitPaths: []string{"a/**"}})
	if err != nil {
		t.Fatal(err)
	}
	check(t, res, 3, 3, 0, 0, 0, "a/TEST-x.xml", "a/b/c/TEST-x.xml", "a/ignored.xml")
}

func TestNoCommand(t *testing.T) {
	r, _ := newRunner(t)
	_, err := r.Test(context.Background(), wire.RewardRequest{})
	d := detail(err)
	if d.Code != wire.CodeBadRequest || !strings.Contains(d.Message, "`command`") || !strings.Contains(d.Message, "--test-command") {
		t.Fatalf("got %v", err)
	}
}

func TestNoReportFound(t *testing.T) {
	r, _ := newRunner(t)
	res, err := r.Test(context.Background(), wire.RewardRequest{Command: "echo compile error >&2; exit 2"})
	d := detail(err)
	if d.Code != wire.CodeNotFound || !strings.Contains(d.Message, "no JUnit report") || !strings.Contains(d.Message, "exited with 2") {
		t.Fatalf("got %v", err)
	}
	if res.Bash.Stderr != "compile error\n" || res.Bash.ExitCode != 2 {
		t.Fatalf("bash result lost: %+v", res.Bash)
	}
}

func TestStaleReportIsNotUsed(t *testing.T) {
	r, ws := newRunner(t)
	if err := os.WriteFile(filepath.Join(ws, "junit.xml"), []byte(`<testsuite><testcase name="a"/></testsuite>`), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := r.Test(context.Background(), wire.RewardRequest{Command: "true", JUnitPaths: []string{"junit.xml"}})
	if d := detail(err); d.Code != wire.CodeNotFound || !strings.Contains(d.Message, "not written during this run") {
		t.Fatalf("got %v", err)
	}
	// Rewriting the same file during the run makes it count.
	res, err := r.Test(context.Background(), wire.RewardRequest{
		Command:    `printf '<testsuite><testcase name="a"/><testcase name="b"/></testsuite>' > junit.xml`,
		JUnitPaths: []string{"junit.xml"},
	})
	if err != nil {
		t.Fatal(err)
	}
	check(t, res, 2, 2, 0, 0, 0, "junit.xml")
}

func TestMalformedReport(t *testing.T) {
	r, _ := newRunner(t)
	for _, globs := range [][]string{{"out/*.xml"}, nil} {
		res, err := r.Test(context.Background(), wire.RewardRequest{
			Command:    `mkdir -p out; printf '<testsuite><testcase name="a">' > out/broken.xml; echo done`,
			JUnitPaths: globs,
		})
		d := detail(err)
		if d.Code != wire.CodeBadRequest || !strings.Contains(d.Message, "out/broken.xml") || !strings.Contains(d.Message, "not a valid JUnit XML report") {
			t.Fatalf("globs %q: got %v", globs, err)
		}
		if res.Bash.Stdout != "done\n" {
			t.Fatalf("bash result lost: %+v", res.Bash)
		}
	}
	// Named explicitly, an XML file that is not a JUnit report is an error too.
	_, err := r.Test(context.Background(), wire.RewardRequest{Command: `printf '<project/>' > pom.xml`, JUnitPaths: []string{"pom.xml"}})
	if d := detail(err); d.Code != wire.CodeBadRequest || !strings.Contains(d.Message, "pom.xml") {
		t.Fatalf("got %v", err)
	}
}

func TestGlobsStayInsideWorkspace(t *testing.T) {
	r, ws := newRunner(t)
	for _, g := range []string{"../*.xml", "a/../../x.xml", "/etc/*.xml", "[", "."} {
		_, err := r.Test(context.Background(), wire.RewardRequest{Command: "true", JUnitPaths: []string{g}})
		if d := detail(err); d.Code != wire.CodeBadRequest || !strings.Contains(d.Message, "junit_paths") {
			t.Errorf("glob %q: got %v", g, err)
		}
	}
	// An absolute glob inside the workspace is fine.
	res, err := r.Test(context.Background(), wire.RewardRequest{Command: flatSuiteCmd, JUnitPaths: []string{filepath.Join(ws, "reports", "*.xml")}})
	if err != nil {
		t.Fatal(err)
	}
	check(t, res, 5, 2, 1, 1, 1, "reports/junit-unit.xml")

	// A symbolic link out of the workspace is not followed, even when a
	// report appears on the other side during the run.
	outside := t.TempDir()
	if err := os.Symlink(outside, filepath.Join(ws, "link")); err != nil {
		t.Fatal(err)
	}
	cmd := `printf '<testsuite><testcase name="a"/></testsuite>' > ` + filepath.Join(outside, "junit.xml")
	for _, g := range []string{"link/*.xml", "**/*.xml"} {
		_, err = r.Test(context.Background(), wire.RewardRequest{Command: cmd, JUnitPaths: []string{g}})
		if d := detail(err); d.Code != wire.CodeNotFound {
			t.Errorf("glob %q through a link out of the workspace: got %v", g, err)
		}
	}
}

func TestBadBashRequestPassesThrough(t *testing.T) {
	r, _ := newRunner(t)
	timeout := -1.0
	_, err := r.Test(context.Background(), wire.RewardRequest{Command: "true", CommandTimeout: &timeout})
	if d := detail(err); d.Code != wire.CodeBadRequest || !strings.Contains(d.Message, "command_timeout") {
		t.Fatalf("got %v", err)
	}
}

// detail is wire.DetailOf that tolerates a nil error, so that a missing
// error fails the test instead of panicking.
func detail(err error) wire.ErrorDetail {
	if err == nil {
		return wire.ErrorDetail{Message: "<nil>"}
	}
	return wire.DetailOf(err)
}
