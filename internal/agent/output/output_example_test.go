package output_test

import (
	"fmt"
	"strings"

	"github.com/berth-mcp/berth/internal/agent/output"
)

// A command printed more than the limit: the buffer keeps how it started
// and how it ended, and says how much it dropped in between.
func ExampleBuffer() {
	b := output.NewBuffer(16)
	fmt.Fprint(b, "building...\n")
	fmt.Fprint(b, strings.Repeat("noise\n", 100))
	fmt.Fprint(b, "FAIL\n")
	fmt.Printf("%q\n", b.String())
	fmt.Println(b.Omitted(), "bytes omitted")
	// Output:
	// "building\n[... 601 bytes omitted ...]\nse\nFAIL\n"
	// 601 bytes omitted
}
