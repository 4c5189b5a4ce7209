package keys_test

import (
	"bytes"
	"testing"

	"github.com/berth-mcp/berth/internal/keys"
)

func TestDeriveSeparatesPurposesAndKeys(t *testing.T) {
	k := []byte("0123456789abcdef0123456789abcdef")
	a, b := keys.Derive(k, "berth seal v1"), keys.Derive(k, "berth session v1")
	if len(a) != 32 || bytes.Equal(a, b) {
		t.Fatalf("purposes share a key or the key is %d bytes", len(a))
	}
	if !bytes.Equal(a, keys.Derive(k, "berth seal v1")) {
		t.Fatal("the same purpose derived two keys")
	}
	if bytes.Equal(a, keys.Derive([]byte("another server key, also 32 bytes"), "berth seal v1")) {
		t.Fatal("two server keys derived the same key")
	}
}
