package cluster

import "container/list"

// prefixCache is an LRU set of block chain hashes. It is used by the step
// loop only and needs no lock.
type prefixCache struct {
	capacity int
	order    *list.List // front = most recently used; values are uint64
	entries  map[uint64]*list.Element
}

func newPrefixCache(capacity int) *prefixCache {
	return &prefixCache{capacity: capacity, order: list.New(), entries: make(map[uint64]*list.Element)}
}

// lookup returns how many leading hashes are cached and marks them used.
func (c *prefixCache) lookup(hashes []uint64) int {
	n := 0
	for _, h := range hashes {
		e, ok := c.entries[h]
		if !ok {
			break
		}
		c.order.MoveToFront(e)
		n++
	}
	return n
}

// insert adds hashes, evicting the least recently used beyond capacity.
func (c *prefixCache) insert(hashes []uint64) {
	if c.capacity == 0 {
		return
	}
	for _, h := range hashes {
		if e, ok := c.entries[h]; ok {
			c.order.MoveToFront(e)
			continue
		}
		c.entries[h] = c.order.PushFront(h)
		for c.order.Len() > c.capacity {
			old := c.order.Back()
			c.order.Remove(old)
			delete(c.entries, old.Value.(uint64))
		}
	}
}
