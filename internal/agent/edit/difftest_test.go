package edit

import (
	"bytes"
	"fmt"
	"strings"
)

// This file holds a small, slow but plain unified diff writer used as the
// oracle of the fuzz test: whatever it writes, ApplyUnifiedDiff must turn
// the old content into the new. It is checked against GNU diff in
// TestGNUDiffRoundTrip.

// rawLines splits content into lines that keep their "\n".
func rawLines(b []byte) [][]byte {
	var out [][]byte
	for len(b) > 0 {
		i := bytes.IndexByte(b, '\n')
		if i < 0 {
			out = append(out, b)
			break
		}
		out = append(out, b[:i+1])
		b = b[i+1:]
	}
	return out
}

type diffOp struct {
	kind byte // ' ', '-', '+'
	line []byte
}

// lcsOps returns an edit script from a to b through a longest common
// subsequence of whole lines (terminator included, so a last line without
// a newline differs from the same text with one).
func lcsOps(a, b [][]byte) []diffOp {
	n, m := len(a), len(b)
	// suffix LCS lengths, (n+1) x (m+1)
	dp := make([][]int, n+1)
	for i := range dp {
		dp[i] = make([]int, m+1)
	}
	for i := n - 1; i >= 0; i-- {
		for j := m - 1; j >= 0; j-- {
			if bytes.Equal(a[i], b[j]) {
				dp[i][j] = dp[i+1][j+1] + 1
			} else {
				dp[i][j] = max(dp[i+1][j], dp[i][j+1])
			}
		}
	}
	var ops []diffOp
	i, j := 0, 0
	for i < n || j < m {
		switch {
		case i < n && j < m && bytes.Equal(a[i], b[j]):
			ops = append(ops, diffOp{' ', a[i]})
			i++
			j++
		case j < m && (i == n || dp[i][j+1] >= dp[i+1][j]):
			ops = append(ops, diffOp{'+', b[j]})
			j++
		default:
			ops = append(ops, diffOp{'-', a[i]})
			i++
		}
	}
	return ops
}

// unifiedDiff writes a unified diff from a to b with ctx context lines.
func unifiedDiff(a, b []byte, ctx int) string {
	ops := lcsOps(rawLines(a), rawLines(b))
	aPos := make([]int, len(ops)+1)
	bPos := make([]int, len(ops)+1)
	var changes []int
	for i, op := range ops {
		aPos[i+1], bPos[i+1] = aPos[i], bPos[i]
		if op.kind != '+' {
			aPos[i+1]++
		}
		if op.kind != '-' {
			bPos[i+1]++
		}
		if op.kind != ' ' {
			changes = append(changes, i)
		}
	}
	var sb strings.Builder
	sb.WriteString("--- a/file\n+++ b/file\n")
	for k := 0; k < len(changes); {
		first, last := changes[k], changes[k]
		k++
		for k < len(changes) && changes[k]-last-1 <= 2*ctx {
			last = changes[k]
			k++
		}
		lo, hi := max(first-ctx, 0), min(last+ctx+1, len(ops))
		aCount, bCount := aPos[hi]-aPos[lo], bPos[hi]-bPos[lo]
		aStart, bStart := aPos[lo], bPos[lo]
		if aCount > 0 {
			aStart++
		}
		if bCount > 0 {
			bStart++
		}
		fmt.Fprintf(&sb, "@@ -%d,%d +%d,%d @@\n", aStart, aCount, bStart, bCount)
		for _, op := range ops[lo:hi] {
			sb.WriteByte(op.kind)
			text, ok := bytes.CutSuffix(op.line, []byte{'\n'})
			sb.Write(text)
			sb.WriteByte('\n')
			if !ok {
				sb.WriteString("\\ No newline at end of file\n")
			}
		}
	}
	return sb.String()
}
