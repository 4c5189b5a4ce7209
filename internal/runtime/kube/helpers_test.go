package kube_test

import (
	"bufio"
	"bytes"
	"testing"

	"github.com/berth-mcp/berth/internal/store"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

func bufioReader(b []byte) *bufio.Reader { return bufio.NewReader(bytes.NewReader(b)) }

func isExists(err error) bool { return apierrors.IsAlreadyExists(err) }

func openStore(t *testing.T, url string) *store.Store {
	t.Helper()
	st, err := store.Open(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)
	return st
}
