package journal

import "os"

// WriteOwnThrough makes j's own file write through w, built over the file.
func WriteOwnThrough(j *Journal, w func(f *os.File) Handle) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.own.w = w(j.own.f)
}

// Handle is what the own file is written through.
type Handle = handle

// Flushes is how many times Flush ran.
func Flushes(j *Journal) int64 { return j.flushes.Load() }

// OwnName is the name the own file is held under.
func OwnName(j *Journal) string {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.own.f.Name()
}
