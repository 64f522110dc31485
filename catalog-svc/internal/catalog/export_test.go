package catalog

// ForgetCompiledSchemas empties the memo of compiled schemas, so a
// benchmark measures registrations whose schemas were never seen.
func ForgetCompiledSchemas() { compiled.Clear() }
