package orchestrator

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/berth-mcp/berth/internal/keys"
)

// agentToken is the bearer token of one sandbox's agent:
// HMAC-SHA256(server key, server id). Any replica can compute it, so it is
// never stored, and a leaked token opens one sandbox only.
func (s *Service) agentToken(serverID string) string { return AgentToken(s.cfg.ServerKey, serverID) }

// AgentToken derives the agent token of the server serverID from a
// server key: what berth sends a sandbox's agent, for tools (benchmarks,
// the load tool's baseline) that call an agent directly as berth does.
func AgentToken(serverKey []byte, serverID string) string {
	return hex.EncodeToString(keys.Derive(serverKey, "berth agent token v1\x00"+serverID))
}

func (s *Service) sealKey() []byte { return keys.Derive(s.cfg.ServerKey, "berth seal v1") }

// seal encrypts v (JSON) with AES-256-GCM under a key derived from the
// server key, so secrets such as env values are never stored in clear.
func (s *Service) seal(v any) ([]byte, error) {
	plain, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	block, err := aes.NewCipher(s.sealKey())
	if err != nil {
		return nil, err
	}
	gcm, err := cipher.NewGCM(block)
	if err != nil {
		return nil, err
	}
	nonce := make([]byte, gcm.NonceSize())
	if _, err := rand.Read(nonce); err != nil {
		return nil, err
	}
	return gcm.Seal(nonce, nonce, plain, nil), nil
}

func (s *Service) unseal(sealed []byte, v any) error {
	if len(sealed) == 0 {
		return nil
	}
	block, err := aes.NewCipher(s.sealKey())
	if err != nil {
		return err
	}
	gcm, err := cipher.NewGCM(block)
	if err != nil {
		return err
	}
	if len(sealed) < gcm.NonceSize() {
		return errors.New("sealed value is too short")
	}
	plain, err := gcm.Open(nil, sealed[:gcm.NonceSize()], sealed[gcm.NonceSize():], nil)
	if err != nil {
		return fmt.Errorf("unseal (was the server key changed?): %w", err)
	}
	return json.Unmarshal(plain, v)
}
