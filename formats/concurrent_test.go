package formats_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/reelkit/reel/formats"
)

// Shards of one replay open writers on one results directory at the same
// moment: none may take another's half-created spool for a dead one.
func TestConcurrentWritersOneDir(t *testing.T) {
	for round := range 10 {
		dir := t.TempDir()
		var wg sync.WaitGroup
		errs := make(chan error, 8)
		for i := range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				w, err := formats.NewWriter[formats.Result](context.Background(), formats.WriterOptions{Dir: dir, Recorder: fmt.Sprintf("replay-shard-%d-of-8", i)})
				if err != nil {
					errs <- err
					return
				}
				w.Close(context.Background())
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatalf("round %d: %v", round, err)
		}
	}
}
