package accesslog_test

import (
	"context"
	"fmt"
	"strings"

	"github.com/reelkit/reel/formats"
	"github.com/reelkit/reel/recorder/accesslog"
)

func ExampleImport() {
	log := `{"msec":"1772632800.250","request_time":"0.250","request_method":"POST","request_uri":"/v1/completions","status":"200","request_body":"{\"prompt\":\"hi\"}"}
this line is broken
`
	rep, err := accesslog.Import(context.Background(), strings.NewReader(log), accesslog.Options{
		Emit: func(x *formats.Exchange) {
			fmt.Println(x.Ts.Format("15:04:05.000"), x.Method, x.Path, x.Status, string(x.ReqBody))
		},
	})
	if err != nil {
		panic(err)
	}
	for _, e := range rep.Errors {
		fmt.Println(e)
	}
	// Output:
	// 14:00:00.000 POST /v1/completions 200 {"prompt":"hi"}
	// line 2: not a JSON object
}
