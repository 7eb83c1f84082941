package toolset_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"

	"github.com/toolguard/toolguard/guard"
	"github.com/toolguard/toolguard/toolset"
)

type GetOrderIn struct {
	OrderID string `json:"order_id" jsonschema:"description=The order id such as A-1001"`
	Fields  string `json:"fields,omitempty" jsonschema:"enum=summary,enum=full"`
}

type Order struct {
	ID     string `json:"id"`
	Status string `json:"status"`
}

// Declaring a read tool derives its strict input schema from the input
// struct: closed objects, every property required, optional fields as
// unions with null.
func ExampleRead() {
	getOrder := toolset.Read("get_order", "Look up an order.", func(ctx context.Context, inv *guard.Invocation, in GetOrderIn) (Order, error) {
		return Order{ID: in.OrderID, Status: "shipped"}, nil
	}, nil)

	var out bytes.Buffer
	_ = json.Indent(&out, getOrder.Schema().JSON(), "", "  ")
	fmt.Println(getOrder.Name(), getOrder.Spec().Effect)
	fmt.Println(out.String())
	// Output:
	// get_order read
	// {
	//   "properties": {
	//     "order_id": {
	//       "type": "string",
	//       "description": "The order id such as A-1001"
	//     },
	//     "fields": {
	//       "anyOf": [
	//         {
	//           "type": "string",
	//           "enum": [
	//             "summary",
	//             "full"
	//           ]
	//         },
	//         {
	//           "type": "null"
	//         }
	//       ]
	//     }
	//   },
	//   "additionalProperties": false,
	//   "type": "object",
	//   "required": [
	//     "order_id",
	//     "fields"
	//   ]
	// }
}

// Decode validates arguments against the schema and decodes them into the
// input struct; the guard calls it with the canonical arguments and their
// parsed tree (numbers as json.Number).
func ExampleTool_Decode() {
	getOrder := toolset.Read("get_order", "Look up an order.", func(ctx context.Context, inv *guard.Invocation, in GetOrderIn) (Order, error) {
		return Order{ID: in.OrderID, Status: "shipped"}, nil
	}, nil)

	for _, args := range []string{
		`{"order_id":"A-1001","fields":null}`,
		`{"order_id":"A-1001","fields":"full"}`,
		`{"order_id":"A-1001"}`,
		`{"order_id":"A-1001","fields":"everything"}`,
	} {
		d := json.NewDecoder(bytes.NewReader([]byte(args)))
		d.UseNumber()
		var parsed any
		_ = d.Decode(&parsed)
		in, err := getOrder.Decode([]byte(args), parsed)
		if err != nil {
			code, _ := guard.CodeOf(err)
			fmt.Println(code, err.(*guard.Error).Message())
			continue
		}
		fmt.Printf("%+v\n", in)
	}
	// Output:
	// {OrderID:A-1001 Fields:}
	// {OrderID:A-1001 Fields:full}
	// INVALID_ARGUMENTS The arguments do not match the tool's schema: at /: missing property 'fields'.
	// INVALID_ARGUMENTS The arguments do not match the tool's schema: at /fields: 'anyOf' failed; at /fields: value must be one of 'summary', 'full'; at /fields: got string, want null.
}

// A set offers tools to the model and finds them by exact name.
func ExampleNew() {
	fn := func(ctx context.Context, inv *guard.Invocation, in GetOrderIn) (Order, error) { return Order{}, nil }
	tools, err := toolset.New(
		toolset.Read("get_order", "Look up an order.", fn, nil),
		toolset.Write("cancel_order", "Cancel an order.", fn, &toolset.Options[GetOrderIn, Order]{NeedsApproval: true}),
	)
	if err != nil {
		panic(err)
	}
	for _, t := range tools.Tools() {
		fmt.Println(t.Name(), t.Spec().Effect, t.Spec().NeedsApproval)
	}
	fmt.Println(tools.Lookup("Get_Order") == nil)

	_, err = toolset.New(toolset.Read("get_order", "", fn, nil), toolset.Read("get_order", "", fn, nil))
	fmt.Println(err)
	// Output:
	// get_order read false
	// cancel_order write true
	// true
	// toolset: duplicate tool name "get_order"
}
