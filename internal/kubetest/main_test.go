package kubetest

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

// env is the control plane this package's tests share: starting one per
// test would cost its start time (see the README) again and again. Each
// test works in its own namespace.
var env *Env

func TestMain(m *testing.M) {
	if os.Getenv(helperEnv) != "" {
		helperMain()
		return
	}
	flag.Parse()
	if testing.Short() {
		os.Exit(m.Run()) // the tests that need env skip
	}
	dir, err := os.MkdirTemp("", "kubetest-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	start := time.Now()
	env, err = New(context.Background(), Options{Dir: dir})
	if err != nil {
		fmt.Fprintln(os.Stderr, "FAIL:", err)
		if errors.Is(err, ErrNoBinaries) {
			os.RemoveAll(dir)
		} else {
			fmt.Fprintf(os.Stderr, "logs in %s\n", dir)
		}
		os.Exit(1)
	}
	fmt.Fprintf(os.Stderr, "kubetest: control plane and %d nodes ready in %s\n", len(env.Nodes), time.Since(start).Round(time.Millisecond))
	code := m.Run()
	env.Close()
	if code == 0 {
		os.RemoveAll(dir)
	} else {
		fmt.Fprintf(os.Stderr, "kubetest: component logs kept in %s\n", dir)
	}
	os.Exit(code)
}

// need returns the shared env, skipping t under -short.
func need(t *testing.T) *Env {
	t.Helper()
	if testing.Short() {
		t.Skip("needs a Kubernetes control plane; skipped under -short")
	}
	return env
}

// helperEnv makes the test binary a container program (see helperMain):
// the kubelet runs it as a pod's process, with no other binary needed.
const helperEnv = "KUBETEST_HELPER"

// helperMain serves on $HELPER_ADDR: /healthz, /env?name=X (the value of
// X), /file?env=X (the file whose path is in X). It writes $HELPER_WRITE
// (a path) first when set; with $HELPER_ALLOC_MIB it only allocates and
// touches that much memory, then exits 0.
func helperMain() {
	if dir := os.Getenv("HELPER_JANITOR_DIR"); dir != "" {
		janitorHelper(dir)
	}
	if n, err := strconv.Atoi(os.Getenv("HELPER_ALLOC_MIB")); err == nil {
		b := make([]byte, n<<20)
		for i := 0; i < len(b); i += 4096 {
			b[i] = 1
		}
		fmt.Println("allocated", n, "MiB")
		return
	}
	if p := os.Getenv("HELPER_WRITE"); p != "" {
		if err := os.WriteFile(p, []byte("written by helper\n"), 0o644); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ok") })
	mux.HandleFunc("/env", func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, os.Getenv(r.URL.Query().Get("name"))) })
	mux.HandleFunc("/file", func(w http.ResponseWriter, r *http.Request) {
		b, err := os.ReadFile(filepath.Clean(os.Getenv(r.URL.Query().Get("env"))))
		if err != nil {
			http.Error(w, err.Error(), http.StatusNotFound)
			return
		}
		w.Write(b)
	})
	addr := os.Getenv("HELPER_ADDR")
	fmt.Printf("helper serving on %s\n", addr)
	if err := http.ListenAndServe(addr, mux); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

type buildError struct {
	err error
	out string
}

func (e *buildError) Error() string { return fmt.Sprintf("build: %v\n%s", e.err, e.out) }
