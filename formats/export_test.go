package formats

// WithPageTap returns opts with a hook that receives a copy of every
// uncompressed page the writer compresses, so benchmarks can time the
// compressor alone on exactly the writer's bytes.
func WithPageTap(opts WriterOptions, tap func(page []byte)) WriterOptions {
	opts.pageTap = tap
	return opts
}
