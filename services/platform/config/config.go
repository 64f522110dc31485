package config

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// EnvPrefix prefixes every environment variable bound by this package.
const EnvPrefix = "SHAREDOS_"

// EnvName returns the environment variable bound to flag name:
// "policy-dir" → "SHAREDOS_POLICY_DIR".
func EnvName(flagName string) string {
	r := strings.NewReplacer("-", "_", ".", "_")
	return EnvPrefix + strings.ToUpper(r.Replace(flagName))
}

// value is a flag.Value that remembers where its default came from, so that
// Parse can report a bad environment value and Reference can show the
// built-in default rather than the environment-derived one.
type value[T any] struct {
	p      *T
	parse  func(string) (T, error)
	format func(T) string
	// def is the built-in default, formatted; usage is without the env hint.
	def, usage string
	env        string
	envErr     error
	isBool     bool
	// appendNext makes repeated StringSlice flags accumulate: the first
	// command-line Set replaces the default, later ones append.
	appendNext bool
	merge      func(old, new T) T
}

// bound is what Parse, Print and Reference need to know about our flags.
type bound interface {
	envInfo() (env, def, usage string, err error)
	text() bool
}

func (v *value[T]) envInfo() (string, string, string, error) { return v.env, v.def, v.usage, v.envErr }

func (v *value[T]) Set(s string) error {
	x, err := v.parse(s)
	if err != nil {
		return err
	}
	if v.merge != nil && v.appendNext {
		x = v.merge(*v.p, x)
	}
	*v.p = x
	v.appendNext = true
	return nil
}

func (v *value[T]) String() string {
	// flag.isZeroValue calls String on a zero value built by reflection.
	if v == nil || v.p == nil || v.format == nil {
		return ""
	}
	return v.format(*v.p)
}

// text tells whether the flag holds text (a string or strings): only
// text can hold a secret, never a switch, a number or a duration.
func (v *value[T]) text() bool {
	switch any(*new(T)).(type) {
	case string, []string:
		return true
	}
	return false
}

// IsBoolFlag lets Bool flags be given as plain --name.
func (v *value[T]) IsBoolFlag() bool { return v.isBool }

func define[T any](fs *flag.FlagSet, name string, def T, usage string, v *value[T]) *T {
	p := new(T)
	*p = def
	v.p = p
	v.def = v.format(def)
	v.usage = usage
	v.env = EnvName(name)
	if raw, ok := os.LookupEnv(v.env); ok {
		x, err := v.parse(raw)
		if err != nil {
			v.envErr = &FieldError{Field: "env " + v.env, Rule: fmt.Sprintf("%q: %v", redactIf(name, raw), err)}
		} else {
			*p = x
		}
	}
	fs.Var(v, name, usage+" (env "+v.env+")")
	return p
}

// String defines a string flag whose default is $SHAREDOS_<NAME> when set.
func String(fs *flag.FlagSet, name, def, usage string) *string {
	return define(fs, name, def, usage, &value[string]{
		parse:  func(s string) (string, error) { return s, nil },
		format: func(s string) string { return s },
	})
}

// Int defines an int flag whose default is $SHAREDOS_<NAME> when set.
//
// The value is read in base 10 only: an operator's "010" means ten, where
// Go's base-prefix rules would read eight, refuse "08" as no integer and
// take "0x10" or "1_000", which no count or size here is written as.
func Int(fs *flag.FlagSet, name string, def int, usage string) *int {
	return define(fs, name, def, usage, &value[int]{
		parse: func(s string) (int, error) {
			n, err := strconv.ParseInt(strings.TrimSpace(s), 10, strconv.IntSize)
			if err != nil {
				return 0, errors.New("must be a decimal integer")
			}
			return int(n), nil
		},
		format: strconv.Itoa,
	})
}

// Bool defines a bool flag whose default is $SHAREDOS_<NAME> when set.
func Bool(fs *flag.FlagSet, name string, def bool, usage string) *bool {
	return define(fs, name, def, usage, &value[bool]{
		parse: func(s string) (bool, error) {
			b, err := strconv.ParseBool(strings.TrimSpace(s))
			if err != nil {
				return false, errors.New("must be a boolean (true, false, 1, 0)")
			}
			return b, nil
		},
		format: strconv.FormatBool,
		isBool: true,
	})
}

// Duration defines a time.Duration flag ("1m30s") whose default is
// $SHAREDOS_<NAME> when set.
func Duration(fs *flag.FlagSet, name string, def time.Duration, usage string) *time.Duration {
	return define(fs, name, def, usage, &value[time.Duration]{
		parse: func(s string) (time.Duration, error) {
			d, err := time.ParseDuration(strings.TrimSpace(s))
			if err != nil {
				return 0, errors.New(`must be a duration such as "500ms" or "1m30s"`)
			}
			return d, nil
		},
		format: time.Duration.String,
	})
}

// StringSlice defines a comma-separated list flag whose default is
// $SHAREDOS_<NAME> when set. Entries are trimmed and empty entries dropped;
// repeating the flag on the command line appends.
func StringSlice(fs *flag.FlagSet, name string, def []string, usage string) *[]string {
	return define(fs, name, append([]string(nil), def...), usage, &value[[]string]{
		parse: func(s string) ([]string, error) { return splitList(s), nil },
		format: func(v []string) string {
			return strings.Join(v, ",")
		},
		merge: func(old, new []string) []string { return append(append([]string(nil), old...), new...) },
	})
}

// Alias defines --alias as another spelling of the flag target, defined
// on fs before it: setting either sets the one value (a list flag given
// both ways keeps every entry). The alias binds no environment variable of
// its own.
func Alias(fs *flag.FlagSet, alias, target string) {
	t := fs.Lookup(target)
	if t == nil {
		panic("config: alias --" + alias + " of undefined --" + target)
	}
	fs.Var(&aliasValue{t.Value}, alias, "the same as --"+target)
}

// aliasValue sets its target; it hides the target's environment binding
// (bound), so the reference lists the variable once, under the target.
type aliasValue struct{ target flag.Value }

func (a *aliasValue) Set(s string) error { return a.target.Set(s) }

// String is "" on the zero value flag.PrintDefaults builds by reflection.
func (a *aliasValue) String() string {
	if a == nil || a.target == nil {
		return ""
	}
	return a.target.String()
}

func splitList(s string) []string {
	var out []string
	for _, part := range strings.Split(s, ",") {
		if part = strings.TrimSpace(part); part != "" {
			out = append(out, part)
		}
	}
	return out
}

// Parse parses args into fs and then reports, as Errors, every environment
// value that did not parse for a flag not given on the command line.
//
// No command parsed here takes positional arguments, so a word left over is
// refused. The flag package stops at the first word that is not a flag, and
// every flag after it would otherwise be dropped without a word: a boolean
// written "--insecure-plaintext false" sets the switch and takes "false" for
// such a word, so that command line ran in plaintext and ignored the rest.
func Parse(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected argument %q (write a boolean as --flag=false)", fs.Arg(0))
	}
	return EnvErrors(fs)
}

// EnvErrors reports the environment values bound to fs's flags that did not
// parse, skipping flags set on the command line (fs must have been parsed
// for that; before parsing every bad value is reported).
func EnvErrors(fs *flag.FlagSet) error {
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	var errs Errors
	fs.VisitAll(func(f *flag.Flag) {
		b, ok := f.Value.(bound)
		if !ok || set[f.Name] {
			return
		}
		if _, _, _, err := b.envInfo(); err != nil {
			var fe *FieldError
			if errors.As(err, &fe) {
				errs = append(errs, fe)
			}
		}
	})
	return errs.Err()
}
