package main

import (
	"context"
	"fmt"
	"io"

	"github.com/reelkit/reel/formats"
)

func runVersion(_ context.Context, _ []string, stdout, _ io.Writer) error {
	fmt.Fprintf(stdout, "reel %s\n", formats.Version)
	return nil
}
