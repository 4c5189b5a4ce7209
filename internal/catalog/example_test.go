package catalog_test

import (
	"fmt"

	"github.com/berth-mcp/berth/internal/catalog"
)

// An operation's REST route names its path and query parameters after
// its input's JSON fields, so both surfaces decode one input the same
// way: here the REST call GET /api/servers/s1/logs?tail=20 and the MCP
// call get_server_logs {"server_id": "s1", "tail": 20}.
func ExampleOp_Decode() {
	logs, _ := catalog.New(nil).Op("get_server_logs")
	fmt.Println(logs.REST.Method, logs.REST.Path, logs.REST.Query, "tool", logs.Tool())

	rest, _ := logs.Decode(nil, []catalog.Param{
		{Name: "server_id", Value: "s1", In: "path"},
		{Name: "tail", Value: "20", In: "query"},
	})
	mcp, _ := logs.Decode([]byte(`{"server_id": "s1", "tail": 20}`), nil)
	fmt.Printf("%+v %+v\n", *rest.(*catalog.LogsInput), *mcp.(*catalog.LogsInput))

	_, err := logs.Decode([]byte(`{"server_id": "s1", "tail": "many"}`), nil)
	fmt.Println(err)
	// Output:
	// GET /api/servers/{server_id}/logs [tail] tool get_server_logs
	// {ServerID:s1 Tail:20} {ServerID:s1 Tail:20}
	// field "tail": want an integer, got string
}
