package memory

// HeldChunks is how many chunks of records the store still holds.
func HeldChunks(s *Store) int {
	s.mu.RLock()
	defer s.mu.RUnlock()
	n := 0
	for _, c := range s.rows.chunks {
		if c != nil {
			n++
		}
	}
	return n
}

// GoneTurns is how many turns' dropped call ids the store keeps.
func GoneTurns(s *Store) int {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return len(s.gone)
}

// ChunkSize is how many records a chunk holds.
const ChunkSize = chunkSize
