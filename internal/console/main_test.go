package console_test

import (
	"testing"

	"github.com/berth-mcp/berth/internal/orchestrator/orchtest"
)

// agentBin is the berth-agent binary built once for every test.
var agentBin string

func TestMain(m *testing.M) { orchtest.Main(m, &agentBin) }
