package rewards

import (
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"strconv"
)

// counts are the test outcomes of one or more reports. Every test case
// lands in exactly one of passed, failed, skipped and errors.
type counts struct {
	total, passed, failed, skipped, errors int
}

func (c *counts) add(o counts) {
	c.total += o.total
	c.passed += o.passed
	c.failed += o.failed
	c.skipped += o.skipped
	c.errors += o.errors
}

// errNotJUnit says the file does not even start like a JUnit report: its
// root element is not <testsuites> or <testsuite>, or there is none.
var errNotJUnit = errors.New("root element is not <testsuites> or <testsuite>")

// suite tracks one open <testsuite> or <testsuites>: its own count
// attributes are only used when it holds no test cases or suites, as some
// tools write just the totals.
type suite struct {
	attrs    counts
	children bool
}

// parseJUnit counts the test cases of a JUnit XML report. It streams the
// document, so report size does not matter, and accepts suites nested to
// any depth. A test case is an error if it has <error>, else failed if it
// has <failure>, else skipped if it has <skipped>, else passed.
func parseJUnit(r io.Reader) (counts, error) {
	dec := xml.NewDecoder(r)
	// Reports sometimes declare a legacy encoding; only the markup matters
	// here, and that is ASCII in all of them.
	dec.CharsetReader = func(_ string, in io.Reader) (io.Reader, error) { return in, nil }
	var (
		c      counts
		stack  []string
		suites []*suite
		tc     struct{ failure, err, skipped bool }
		root   bool
	)
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			break
		}
		if err != nil && !root {
			return counts{}, fmt.Errorf("%w: %w", errNotJUnit, err)
		}
		if err != nil {
			return counts{}, err
		}
		switch t := tok.(type) {
		case xml.StartElement:
			name := t.Name.Local
			parent := ""
			if len(stack) > 0 {
				parent = stack[len(stack)-1]
			}
			if !root {
				if name != "testsuites" && name != "testsuite" {
					return counts{}, errNotJUnit
				}
				root = true
			}
			switch {
			case name == "testsuites" || name == "testsuite":
				if len(suites) > 0 {
					suites[len(suites)-1].children = true
				}
				suites = append(suites, &suite{attrs: attrCounts(t.Attr)})
			case name == "testcase" && (parent == "testsuite" || parent == "testsuites"):
				suites[len(suites)-1].children = true
				tc.failure, tc.err, tc.skipped = false, false, false
			case parent == "testcase":
				switch name {
				case "failure":
					tc.failure = true
				case "error":
					tc.err = true
				case "skipped":
					tc.skipped = true
				}
			}
			stack = append(stack, name)
		case xml.EndElement:
			name := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			switch {
			case name == "testsuites" || name == "testsuite":
				s := suites[len(suites)-1]
				suites = suites[:len(suites)-1]
				if !s.children {
					c.add(s.attrs)
				}
			case name == "testcase" && len(stack) > 0 && (stack[len(stack)-1] == "testsuite" || stack[len(stack)-1] == "testsuites"):
				c.total++
				switch {
				case tc.err:
					c.errors++
				case tc.failure:
					c.failed++
				case tc.skipped:
					c.skipped++
				default:
					c.passed++
				}
			}
		}
	}
	if !root {
		return counts{}, fmt.Errorf("%w: no root element", errNotJUnit)
	}
	return c, nil
}

// attrCounts reads the totals a suite states about itself.
func attrCounts(attrs []xml.Attr) counts {
	var c counts
	for _, a := range attrs {
		n, err := strconv.Atoi(a.Value)
		if err != nil || n < 0 {
			continue
		}
		switch a.Name.Local {
		case "tests":
			c.total = n
		case "failures":
			c.failed = n
		case "errors":
			c.errors = n
		case "skipped", "skip":
			c.skipped = n
		}
	}
	// Keep every case in exactly one bucket even if the totals disagree.
	c.passed = max(0, c.total-c.failed-c.errors-c.skipped)
	c.total = c.passed + c.failed + c.errors + c.skipped
	return c
}
