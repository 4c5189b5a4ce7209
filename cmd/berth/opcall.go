package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/url"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/berth-mcp/berth/internal/catalog"
	"github.com/berth-mcp/berth/internal/wire"
)

// The client commands call operations by their catalogue name: the REST
// method and path come from the catalogue's route, path parameters and
// query fields from the input fields given, and the rest is the JSON
// body, so the CLI follows the API without a route of its own.

// operations is the catalogue without a service behind it: the CLI
// reads its routes and never calls it.
var operations = catalog.New(nil)

// callOp calls operation name with the input fields and decodes the
// answer into out (nil keeps it raw). It returns the raw answer.
func callOp(ctx context.Context, r *remote, name string, fields map[string]any, out any) (json.RawMessage, error) {
	op, ok := operations.Op(name)
	if !ok || op.REST.Path == "" {
		return nil, fmt.Errorf("operation %s has no REST route", name)
	}
	rest := map[string]any{}
	for k, v := range fields {
		if s, ok := v.(string); ok && s == "" {
			continue // not given
		}
		rest[k] = v
	}
	path := op.REST.Path
	for _, p := range op.REST.PathParams() {
		v, _ := rest[p].(string)
		if v == "" {
			return nil, wire.Errorf(wire.CodeBadRequest, "%s needs %s", name, p)
		}
		path = strings.Replace(path, "{"+p+"}", url.PathEscape(v), 1)
		delete(rest, p)
	}
	q := url.Values{}
	for _, k := range op.REST.Query {
		if v, ok := rest[k]; ok {
			if s := fmt.Sprint(v); s != "" {
				q.Set(k, s)
			}
			delete(rest, k)
		}
	}
	if len(q) > 0 {
		path += "?" + q.Encode()
	}
	var body any
	if op.REST.HasBody() {
		body = rest
	} else if len(rest) > 0 {
		return nil, fmt.Errorf("operation %s takes no body, but got %s", name, strings.Join(sortedKeys(rest), ", "))
	}
	var raw json.RawMessage
	if err := callAPI(ctx, r, op.REST.Method, path, body, &raw); err != nil {
		return nil, err
	}
	if out != nil {
		if err := json.Unmarshal(raw, out); err != nil {
			return raw, wire.Errorf(wire.CodeBadGateway, "%s %s answered JSON of another shape: %v", op.REST.Method, path, err)
		}
	}
	return raw, nil
}

func sortedKeys(m map[string]any) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// outputFormat is the -o flag of a client command.
type outputFormat string

func (o *outputFormat) register(cmd *cobra.Command) {
	*o = "table"
	cmd.Flags().StringVarP((*string)(o), "output", "o", "table", "output format: table or json")
}

func (o outputFormat) check() error {
	if o != "table" && o != "json" {
		return wire.Errorf(wire.CodeBadRequest, "-o %s: want table or json", string(o))
	}
	return nil
}

// json writes v, or raw JSON as it came, indented, on w.
func writeJSON(w io.Writer, v any) error {
	if raw, ok := v.(json.RawMessage); ok {
		var buf bytes.Buffer
		if err := json.Indent(&buf, raw, "", "  "); err != nil {
			return err
		}
		buf.WriteByte('\n')
		_, err := w.Write(buf.Bytes())
		return err
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// writeTable writes a header and rows, aligned.
func writeTable(w io.Writer, header []string, rows [][]string) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, strings.Join(header, "\t"))
	for _, r := range rows {
		for i, c := range r {
			if c == "" {
				r[i] = "-"
			}
		}
		fmt.Fprintln(tw, strings.Join(r, "\t"))
	}
	return tw.Flush()
}

// clientCmd is what every client command shares: credentials and -o.
type clientCmd struct {
	config string
	out    outputFormat
}

func (c *clientCmd) register(cmd *cobra.Command) {
	configFlag(cmd, &c.config)
	c.out.register(cmd)
}

func (c *clientCmd) remote(e *env) (*remote, error) {
	if err := c.out.check(); err != nil {
		return nil, err
	}
	return credentials(e.getenv, c.config)
}
