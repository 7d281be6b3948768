package cluster

import "time"

// seq is one request inside the engine. Only the step loop touches it.
type seq struct {
	prompt int      // prompt tokens
	outLen int      // output tokens to generate in total
	finish string   // finish_reason once outLen is reached: "stop" or "length"
	hashes []uint64 // prefix-cache chain hashes of the prompt's full blocks
	long   bool     // waits in the long-prompt queue

	target    int // tokens to prefill before decoding: prompt, or prompt+generated after a preemption
	computed  int // tokens whose KV is computed (cached prefix included)
	generated int // output tokens produced
	blocks    int // KV blocks held
	chunk     int // tokens scheduled in the current step, 0 when not scheduled

	admitted     bool // admitted to the running batch at least once
	batchAtAdmit int  // sequences in the step that first admitted it
	queueDepth   int  // requests waiting ahead of it when the engine first saw it
	cached       int  // prompt tokens served by the prefix cache at the first admission
	preemptions  int

	req *request // the HTTP request waiting for it; nil under Simulate
	idx int      // index of its SimRequest under Simulate
}

// prefilling reports whether s still has prompt (or recompute) tokens to prefill.
func (s *seq) prefilling() bool { return s.computed < s.target }

// engine is the continuous-batching scheduler: vLLM V1's policy of
// scheduling running decodes first, then running partial prefills, then
// admitting waiting requests under the step's token budget and the KV
// capacity. It keeps simulated time only; the caller owns the clock.
type engine struct {
	o           *Options
	totalBlocks int
	freeBlocks  int
	watermark   int // blocks kept free when admitting next to a running batch (vLLM: 1 %)
	running     []*seq
	waiting     []*seq // first-come-first-served; preempted sequences go back to the front
	waitingLong []*seq // long prompts when the long-prompt queue is on
	cache       *prefixCache

	// Results of the current step, reused between steps.
	scheduled []*seq
	admitted  []*seq
	emitted   []*seq
	finished  []*seq

	// Totals since start.
	steps, preemptions, genTokens int64
	cacheQueries, cacheHits       int64 // in tokens, as vLLM counts them
	lastStepPrefill               int   // prefill tokens in the last step
}

func newEngine(o *Options) *engine {
	blocks := o.KVCapacityTokens / BlockTokens
	e := &engine{o: o, totalBlocks: blocks, freeBlocks: blocks, watermark: blocks / 100}
	if !o.DisablePrefixCache {
		e.cache = newPrefixCache(o.PrefixCacheBlocks)
	}
	return e
}

func blocksFor(tokens int) int { return (tokens + BlockTokens - 1) / BlockTokens }

func (e *engine) lanes() bool { return e.o.LongPromptThreshold > 0 }

// enqueue adds a new sequence to its waiting queue.
func (e *engine) enqueue(s *seq) {
	s.target = s.prompt
	s.queueDepth = len(e.waiting) + len(e.waitingLong)
	s.long = e.lanes() && s.prompt >= e.o.LongPromptThreshold
	if s.long {
		e.waitingLong = append(e.waitingLong, s)
	} else {
		e.waiting = append(e.waiting, s)
	}
}

func (e *engine) idle() bool {
	return len(e.running) == 0 && len(e.waiting) == 0 && len(e.waitingLong) == 0
}

func (e *engine) numWaiting() int { return len(e.waiting) + len(e.waitingLong) }

// kvUsage is the share of KV blocks in use, 0..1.
func (e *engine) kvUsage() float64 {
	return float64(e.totalBlocks-e.freeBlocks) / float64(e.totalBlocks)
}

// schedule plans one step and returns its simulated duration; ok is false
// when nothing could be scheduled.
func (e *engine) schedule() (d time.Duration, ok bool) {
	e.scheduled, e.admitted, e.emitted, e.finished = e.scheduled[:0], e.admitted[:0], e.emitted[:0], e.finished[:0]
	budget := e.o.MaxBatchedTokens
	prefill := 0

	// 1. One decode token for every running sequence past its prefill,
	// preempting the newest sequences when the KV cache is full.
	for i := 0; i < len(e.running) && budget > 0; i++ {
		s := e.running[i]
		if s.prefilling() {
			continue
		}
		if !e.growKV(s, i) {
			break // s itself was preempted; it was the newest
		}
		s.chunk = 1
		budget--
		e.scheduled = append(e.scheduled, s)
	}

	// 2. Continue partial prefills.
	longPrefilling := 0
	for _, s := range e.running {
		if !s.prefilling() {
			continue
		}
		if s.long {
			longPrefilling++
		}
		if budget == 0 {
			continue
		}
		n := e.chunkFor(s, budget)
		s.chunk = n
		budget -= n
		prefill += n
		e.scheduled = append(e.scheduled, s)
	}

	// 3. Admit waiting requests while budget, batch slots and KV allow.
	for budget > 0 && len(e.running) < e.o.MaxNumSeqs {
		q := &e.waiting
		if len(*q) == 0 {
			if !e.lanes() || len(e.waitingLong) == 0 || longPrefilling >= e.o.MaxLongPrefills {
				break
			}
			q = &e.waitingLong
		}
		s := (*q)[0]
		need := blocksFor(s.target)
		reserve := 0
		if len(e.running) > 0 {
			reserve = e.watermark
		}
		if need > e.freeBlocks-reserve {
			break
		}
		(*q)[0] = nil
		*q = (*q)[1:]
		e.freeBlocks -= need
		s.blocks = need
		s.computed = 0
		if e.cache != nil && len(s.hashes) > 0 {
			hit := min(e.cache.lookup(s.hashes)*BlockTokens, s.target-1)
			e.cacheQueries += int64(s.target)
			e.cacheHits += int64(hit)
			s.computed = hit
			if !s.admitted {
				s.cached = hit
			}
		}
		if s.long {
			longPrefilling++
		}
		if !s.admitted {
			e.admitted = append(e.admitted, s)
		}
		e.running = append(e.running, s)
		n := e.chunkFor(s, budget)
		s.chunk = n
		budget -= n
		prefill += n
		e.scheduled = append(e.scheduled, s)
	}
	// 4. Work-conserving: with no short request waiting, long prefills may
	// use what is left of the budget beyond their chunk cap.
	if e.lanes() && len(e.waiting) == 0 && budget > 0 {
		for _, s := range e.scheduled {
			if s.long && s.prefilling() && budget > 0 {
				extra := min(s.target-s.computed-s.chunk, budget)
				s.chunk += extra
				budget -= extra
				prefill += extra
			}
		}
	}
	for _, s := range e.admitted {
		s.admitted = true
		s.batchAtAdmit = len(e.scheduled)
	}
	e.lastStepPrefill = prefill
	if len(e.scheduled) == 0 {
		return 0, false
	}
	e.steps++
	return e.o.stepCost(len(e.scheduled), prefill), true
}

// chunkFor is the prefill chunk s gets with budget tokens left.
func (e *engine) chunkFor(s *seq, budget int) int {
	n := min(s.target-s.computed, budget)
	if s.long {
		n = min(n, e.o.LongPrefillChunk)
	}
	return n
}

// growKV makes room for running[i]'s next token, preempting from the tail
// of the running batch (the newest) when no block is free. It reports
// false when running[i] itself had to go.
func (e *engine) growKV(s *seq, i int) bool {
	for s.computed+1 > s.blocks*BlockTokens {
		if e.freeBlocks > 0 {
			e.freeBlocks--
			s.blocks++
			continue
		}
		last := len(e.running) - 1
		victim := e.running[last]
		e.preempt(last)
		if last == i || victim == s {
			return false
		}
	}
	return true
}

// preempt moves running[i] back to the front of its queue; its KV is freed
// and recomputed on readmission (vLLM's recompute preemption).
func (e *engine) preempt(i int) {
	s := e.running[i]
	e.running = append(e.running[:i], e.running[i+1:]...)
	e.freeBlocks += s.blocks
	s.blocks, s.computed, s.chunk = 0, 0, 0
	s.target = s.prompt + s.generated
	s.preemptions++
	e.preemptions++
	if s.long {
		e.waitingLong = append([]*seq{s}, e.waitingLong...)
	} else {
		e.waiting = append([]*seq{s}, e.waiting...)
	}
}

// apply completes the step planned by schedule: prefill chunks advance,
// finished prefills and decodes emit a token, done sequences leave.
func (e *engine) apply() {
	for _, s := range e.scheduled {
		if s.prefilling() {
			s.computed += s.chunk
			if s.prefilling() {
				s.chunk = 0
				continue
			}
			if e.cache != nil {
				e.cache.insert(s.hashes)
			}
		} else {
			s.computed++
		}
		s.chunk = 0
		s.generated++
		e.genTokens++
		e.emitted = append(e.emitted, s)
		if s.generated >= s.outLen {
			e.finished = append(e.finished, s)
		}
	}
	if len(e.finished) == 0 {
		return
	}
	for _, s := range e.finished {
		e.freeBlocks += s.blocks
		s.blocks = 0
		s.outLen = -1 // marks it for removal below
	}
	kept := e.running[:0]
	for _, s := range e.running {
		if s.outLen >= 0 {
			kept = append(kept, s)
		}
	}
	clear(e.running[len(kept):])
	e.running = kept
	for _, s := range e.finished {
		s.outLen = s.generated
	}
}

// remove drops every sequence for which drop returns true (cancelled
// requests), freeing its KV, and returns how many it dropped.
func (e *engine) remove(drop func(*seq) bool) int {
	n := 0
	filter := func(list []*seq, free bool) []*seq {
		kept := list[:0]
		for _, s := range list {
			if drop(s) {
				n++
				if free {
					e.freeBlocks += s.blocks
					s.blocks = 0
				}
				continue
			}
			kept = append(kept, s)
		}
		clear(list[len(kept):])
		return kept
	}
	e.running = filter(e.running, true)
	e.waiting = filter(e.waiting, false)
	e.waitingLong = filter(e.waitingLong, false)
	return n
}
