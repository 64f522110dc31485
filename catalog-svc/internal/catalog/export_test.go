package catalog

// ForgetCompiledSchemas empties the memo of compiled schemas, so a
// benchmark measures registrations whose schemas were never seen.
func ForgetCompiledSchemas() { compiled.Clear() }

// OnLockingResource sets what hears each resource lock taken, before it
// waits for it.
func (s *Service) OnLockingResource(f func(key string)) { s.lockingResource = f }

// OnCheckedOverlap sets what hears the work each CheckResourceOverlap did
// (resourceuri.Work: a pair compared, a state walked).
func (s *Service) OnCheckedOverlap(f func(work int)) { s.checkedOverlap = f }
