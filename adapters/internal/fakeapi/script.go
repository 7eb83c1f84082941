package fakeapi

import (
	"fmt"
	"sync"
)

// script is a server's state: the queue of scripted turns, the log of
// the requests received and the id counters, safe for concurrent use. R
// is the fake's decoded request type.
type script[T, R any] struct {
	mu       sync.Mutex
	turns    []T
	next     int
	requests []R
	counters map[string]int
}

func newScript[T, R any](turns []T) *script[T, R] {
	return &script[T, R]{turns: append([]T(nil), turns...), counters: map[string]int{}}
}

// take returns the next turn and its index, or false once the script is
// exhausted.
func (s *script[T, R]) take() (T, int, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var zero T
	if s.next >= len(s.turns) {
		return zero, -1, false
	}
	s.next++
	return s.turns[s.next-1], s.next - 1, true
}

func (s *script[T, R]) enqueue(turns ...T) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.turns = append(s.turns, turns...)
}

func (s *script[T, R]) remaining() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.turns) - s.next
}

// log puts r in the log at index i, or appends it when i is negative,
// and returns its index.
func (s *script[T, R]) log(i int, r R) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if i < 0 {
		s.requests = append(s.requests, r)
		return len(s.requests) - 1
	}
	s.requests[i] = r
	return i
}

func (s *script[T, R]) logged() []R {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]R(nil), s.requests...)
}

// newID returns a fresh id such as "toolu_0001".
func (s *script[T, R]) newID(prefix string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.counters[prefix]++
	return fmt.Sprintf("%s_%04d", prefix, s.counters[prefix])
}
