// Package config binds command-line flags to SHAREDOS_* environment
// variables, so every setting of every service has exactly one name in each
// world: flag --policy-dir is environment variable SHAREDOS_POLICY_DIR
// (Helm charts set env, developers pass flags).
//
// Precedence is flag > environment > built-in default. The helpers (String,
// Int, Bool, Duration, StringSlice) read the environment when the flag is
// defined; an environment value that does not parse is not fatal there (the
// helpers cannot return errors) but is reported by Parse or EnvErrors, naming
// the variable, unless the flag was set on the command line and so overrides
// it. Parse also refuses a word left after the flags: no command parsed here
// takes one, and the flags after it would be lost (a boolean is written
// --flag=false, never --flag false).
//
// A Config type's Validate method collects problems in an Errors value, so
// startup reports every bad setting at once:
//
//	var errs config.Errors
//	if c.PolicyDir == "" {
//		errs.Add("policy-dir", "must be set")
//	}
//	return errs.Err() // "flag --policy-dir: must be set"
//
// Print logs the effective configuration with secrets redacted and
// Reference renders the markdown configuration table used in the READMEs.
package config
