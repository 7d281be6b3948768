package replayer

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// ignoreEOSServers are the servers whose OpenAI-compatible chat and
// completion endpoints take vLLM's ignore_eos extension, by the owned_by
// their GET /v1/models reports.
var ignoreEOSServers = []string{"vllm", "sglang", "simcluster"}

// TargetTakesIgnoreEOS asks target's GET /v1/models which server it is and
// reports whether that server is known to accept ignore_eos (vLLM, SGLang,
// reel's simulator) and what it answered. Any failure — no such endpoint, a
// timeout of 5 s, another server — answers false: OpenAI's own API rejects
// unknown fields, so ignore_eos is sent only where it is known to work.
// header carries the shadow's credentials (--header).
func TargetTakesIgnoreEOS(ctx context.Context, target *url.URL, header http.Header) (bool, string) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	u := *target
	u.Path = strings.TrimSuffix(u.Path, "/") + "/v1/models"
	u.RawQuery = ""
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return false, ""
	}
	for k, vs := range header {
		req.Header[k] = vs
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return false, ""
	}
	defer resp.Body.Close()
	var models struct {
		Data []struct {
			OwnedBy string `json:"owned_by"`
		} `json:"data"`
	}
	if resp.StatusCode != http.StatusOK || json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&models) != nil || len(models.Data) == 0 {
		return false, ""
	}
	owner := strings.ToLower(models.Data[0].OwnedBy)
	for _, s := range ignoreEOSServers {
		if owner == s {
			return true, owner
		}
	}
	return false, owner
}

// ProbeIgnoreEOS asks the plan's target whether it takes ignore_eos
// (TargetTakesIgnoreEOS: one GET /v1/models) and, when it does, sends
// ignore_eos with the pinned requests of the plan's runs. Call it before
// Run; NewPlan has checked the target by then, so a refused production
// host is never asked.
func (p *Plan) ProbeIgnoreEOS(ctx context.Context) (ok bool, server string) {
	ok, server = TargetTakesIgnoreEOS(ctx, p.opts.Target, p.opts.Headers)
	if ok {
		p.opts.IgnoreEOS = true
	}
	return ok, server
}
