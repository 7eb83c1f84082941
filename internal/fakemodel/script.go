package fakemodel

import (
	"fmt"
	"sync"
)

// script is a server's state: the queue of scripted turns, the log of
// the requests received and the id counters, safe for concurrent use. R
// is the fake's decoded request type.
type script[R Request] struct {
	mu       sync.Mutex
	turns    []Turn
	next     int
	requests []R
	counters map[string]int
}

func newScript[R Request](turns []Turn) *script[R] {
	return &script[R]{turns: append([]Turn(nil), turns...), counters: map[string]int{}}
}

// take returns the next turn and its index, or false once the script is
// exhausted.
func (s *script[R]) take() (Turn, int, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var zero Turn
	if s.next >= len(s.turns) {
		return zero, -1, false
	}
	s.next++
	return s.turns[s.next-1], s.next - 1, true
}

func (s *script[R]) enqueue(turns ...Turn) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.turns = append(s.turns, turns...)
}

func (s *script[R]) remaining() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.turns) - s.next
}

// log puts r in the log at index i, or appends it when i is negative,
// and returns its index.
func (s *script[R]) log(i int, r R) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if i < 0 {
		s.requests = append(s.requests, r)
		return len(s.requests) - 1
	}
	s.requests[i] = r
	return i
}

func (s *script[R]) logged() []R {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]R(nil), s.requests...)
}

// newID returns a fresh id such as "toolu_0001".
func (s *script[R]) newID(prefix string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.counters[prefix]++
	return fmt.Sprintf("%s_%04d", prefix, s.counters[prefix])
}
