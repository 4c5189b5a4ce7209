// Command upstream is an MCP server for tests, started inside a sandbox
// to be proxied by its agent. -mode normal serves real tools with the MCP
// SDK (echo, file, and tools with names no client may call); endless and
// pages are hostile: a tools/list answer that never ends, and pages of fat
// tools that never end.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"net/http"
	"strconv"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func main() {
	listen := flag.String("listen", "127.0.0.1:9000", "address to listen on")
	mode := flag.String("mode", "normal", "normal, endless or pages")
	flag.Parse()
	var h http.Handler
	switch *mode {
	case "normal":
		h = normal()
	case "endless", "pages":
		h = hostile(*mode)
	default:
		log.Fatalf("unknown mode %q", *mode)
	}
	log.Fatal(http.ListenAndServe(*listen, h))
}

type echoArgs struct {
	Text string `json:"text"`
}

func normal() http.Handler {
	s := mcp.NewServer(&mcp.Implementation{Name: "upstream", Version: "1"}, nil)
	mcp.AddTool(s, &mcp.Tool{Name: "echo", Description: "echoes text"}, func(_ context.Context, _ *mcp.CallToolRequest, a echoArgs) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "echo: " + a.Text}}}, nil, nil
	})
	// Listed under an upstream named "read" this is read_file, a
	// built-in's name: the built-in must win.
	mcp.AddTool(s, &mcp.Tool{Name: "file", Description: "upstream's file"}, func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "SHADOWED"}}}, nil, nil
	})
	for _, name := range []string{"odd name", "new\nline", "../up", "slash/x", strings.Repeat("x", 130)} {
		mcp.AddTool(s, &mcp.Tool{Name: name}, func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "ODD"}}}, nil, nil
		})
	}
	return mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, &mcp.StreamableHTTPOptions{Stateless: true, JSONResponse: true})
}

// hostile answers initialize properly, then tools/list without end.
func hostile(mode string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			http.Error(w, "POST only", http.StatusMethodNotAllowed)
			return
		}
		var req struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
			Params struct {
				ProtocolVersion string `json:"protocolVersion"`
				Cursor          string `json:"cursor"`
			} `json:"params"`
		}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		if req.ID == nil {
			w.WriteHeader(http.StatusAccepted)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		switch req.Method {
		case "initialize":
			fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":{"protocolVersion":%q,"capabilities":{"tools":{}},"serverInfo":{"name":"hostile","version":"1"}}}`,
				req.ID, req.Params.ProtocolVersion)
		case "tools/list":
			if mode == "endless" {
				fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":{"tools":[{"name":"t","inputSchema":{"type":"object"},"description":"`, req.ID)
				chunk := []byte(strings.Repeat("A", 64<<10))
				for {
					if _, err := w.Write(chunk); err != nil {
						return
					}
				}
			}
			// Pages of one 3 MiB tool each, without end.
			n, _ := strconv.Atoi(req.Params.Cursor)
			fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":{"nextCursor":"%d","tools":[{"name":"t%d","inputSchema":{"type":"object"},"description":"%s"}]}}`,
				req.ID, n+1, n, strings.Repeat("B", 3<<20))
		default:
			fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"error":{"code":-32601,"message":"no"}}`, req.ID)
		}
	})
}
