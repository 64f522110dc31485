package files

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/big"
	"os"
	"path"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"unicode/utf8"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	sharedosv1 "github.com/sharedos/toolshare/proto/sharedos/v1"
	"github.com/sharedos/toolshare/services/contract/requirement"
)

// Tool names served.
const (
	ToolRead   = "files.read"
	ToolSearch = "files.search"
	ToolWrite  = "files.write"
)

// Limits.
const (
	// MaxFileBytes bounds what read returns, what search scans per file and
	// what write accepts.
	MaxFileBytes = 1 << 20
	// DefaultSearchLimit and MaxSearchLimit bound search matches.
	DefaultSearchLimit = 20
	MaxSearchLimit     = 100
	// maxQueryChars bounds the query in characters (code points), as the
	// catalogue schema's maxLength counts it: a query the kernel passed
	// is never refused here for its bytes.
	maxQueryChars = 1024
	maxLineBytes  = 512
)

// overwrite makes content the whole of f, on disk ("wrote n bytes" means
// synced): the in-place write of both builds.
func overwrite(f *os.File, content string) (int, error) {
	if err := f.Truncate(0); err != nil {
		return 0, err
	}
	n, err := f.WriteString(content)
	if err == nil {
		err = f.Sync()
	}
	return n, err
}

// tempPrefix begins the name of the file a write fills before renaming
// it over its target: no tool reads, lists or writes such a name.
const tempPrefix = ".sharedos-write-"

// Provider serves the files tools over one root directory.
type Provider struct {
	sharedosv1.UnimplementedToolHandlerServiceServer
	root *os.Root
	dir  *os.File // the root directory, for openat2 (openBeneath)
	// linkProofOpen: openBeneath itself refuses a symbolic link on every
	// component (openat2 with RESOLVE_NO_SYMLINKS works here), so a path
	// that must exist needs no Lstat walk before it.
	linkProofOpen bool
	// walk is the file system search walks (nil: the provider's own,
	// beneathFS).
	walk fs.FS
}

var _ sharedosv1.ToolHandlerServiceServer = (*Provider)(nil)

// New opens dir as the provider's root.
func New(dir string) (*Provider, error) {
	r, err := os.OpenRoot(dir)
	if err != nil {
		return nil, fmt.Errorf("files: open root %q: %w", dir, err)
	}
	d, err := os.Open(dir)
	if err != nil {
		_ = r.Close()
		return nil, fmt.Errorf("files: open root %q: %w", dir, err)
	}
	p := &Provider{root: r, dir: d}
	p.linkProofOpen = p.opensBeneath()
	return p, nil
}

// Close releases the root.
func (p *Provider) Close() error { return errors.Join(p.root.Close(), p.dir.Close()) }

// Handle implements sharedosv1.ToolHandlerServiceServer.
func (p *Provider) Handle(ctx context.Context, req *sharedosv1.HandleRequest) (*sharedosv1.HandleResponse, error) {
	var (
		text string
		err  error
	)
	switch req.GetTool() {
	case ToolRead:
		text, err = p.read(req.GetArgumentsJson())
	case ToolSearch:
		text, err = p.search(ctx, req.GetArgumentsJson())
	case ToolWrite:
		text, err = p.write(req.GetArgumentsJson())
	default:
		return nil, status.Errorf(codes.InvalidArgument, "files: unknown tool %q", req.GetTool())
	}
	if err != nil {
		if ctxErr := ctx.Err(); ctxErr != nil {
			return nil, status.FromContextError(ctxErr).Err()
		}
		return textResult(err.Error(), true), nil
	}
	return textResult(text, false), nil
}

type textContent struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

func textResult(text string, isError bool) *sharedosv1.HandleResponse {
	b, _ := json.Marshal([]textContent{{Type: "text", Text: text}}) // cannot fail for strings
	return &sharedosv1.HandleResponse{ContentJson: b, IsError: isError}
}

// decode parses args strictly: one JSON object, every key exactly one of
// v's json field names (encoding/json alone would also match "PATH" or
// "Path" to "path": a key the policy never saw), each once (encoding/json
// takes the last of two "path" keys, where another reader may take the
// first), no unknown keys, nothing after it. The provider does not rely on
// the kernel's schema validation.
func decode(args []byte, v any) error {
	var keys map[string]json.RawMessage
	if err := json.Unmarshal(args, &keys); err != nil {
		return fmt.Errorf("invalid arguments: %w", err)
	}
	fields := jsonFields(v)
	for k := range keys {
		if !fields[k] {
			return fmt.Errorf("invalid arguments: unknown key %q (keys match exactly)", k)
		}
	}
	if k, ok := repeatedKey(args); ok {
		return fmt.Errorf("invalid arguments: key %q given more than once", k)
	}
	// Every key is one of v's exact names, and Unmarshal above refused
	// anything after the object: decoding into v can only fail on a type.
	if err := json.Unmarshal(args, v); err != nil {
		return fmt.Errorf("invalid arguments: %w", err)
	}
	return nil
}

// repeatedKey reports a key the JSON object args (already parsed whole)
// gives more than once, however spelled ("pa\u0074h" is "path").
func repeatedKey(args []byte) (string, bool) {
	dec := json.NewDecoder(bytes.NewReader(args))
	if _, err := dec.Token(); err != nil { // '{'
		return "", false
	}
	seen := map[string]bool{}
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return "", false
		}
		k, _ := t.(string)
		if seen[k] {
			return k, true
		}
		seen[k] = true
		var skip json.RawMessage
		if dec.Decode(&skip) != nil {
			return "", false
		}
	}
	return "", false
}

// jsonFields are the json names of the fields of the struct v points to.
func jsonFields(v any) map[string]bool {
	t := reflect.TypeOf(v).Elem()
	out := make(map[string]bool, t.NumField())
	for i := range t.NumField() {
		name, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ",")
		if name != "" && name != "-" {
			out[name] = true
		}
	}
	return out
}

// wholeNumber reads raw, a JSON value, as an integer from lo to hi. JSON
// Schema's "integer" (the catalogue's type for such an argument, which the
// kernel checks) is any number without a fraction, written 5, 5.0 or 5e0
// alike, so each is taken; a string, a fraction or a number out of range is
// not. The range is checked on the float first, so that no exponent makes
// the exact check (big.Rat) work on a huge number.
func wholeNumber(raw json.RawMessage, lo, hi int) (int, bool) {
	s := string(raw)
	if s == "" || s[0] != '-' && (s[0] < '0' || s[0] > '9') {
		return 0, false // a string, true, an object: no number at all
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || f < float64(lo) || f > float64(hi) {
		return 0, false
	}
	r, ok := new(big.Rat).SetString(s)
	if !ok || !r.IsInt() {
		return 0, false
	}
	return int(r.Num().Int64()), true
}

// target is one cleaned, checked path inside the root.
type target struct {
	display string // cleaned absolute path, as the policy saw it
	rel     string // os.Root-relative name
}

// resolve cleans p (the kernel's POSIX rule, applied again) and refuses NUL,
// invalid UTF-8 and any symbolic link on the way. opened says the caller
// reaches the target only through openBeneath (files.read), which checks
// the links itself where openat2 works.
func (p *Provider) resolve(field, raw string, mustExist, opened bool) (target, error) {
	if strings.IndexByte(raw, 0) >= 0 || !utf8.ValidString(raw) {
		return target{}, fmt.Errorf("invalid arguments: %s must be valid UTF-8 without NUL", field)
	}
	clean := requirement.CleanPOSIX(raw)
	t := target{display: clean, rel: "."}
	if clean != "/" {
		t.rel = clean[1:]
	}
	if strings.HasPrefix(path.Base(clean), tempPrefix) {
		// A write under way (or one a crash cut short): the new content
		// of a file the policy judged by its own name.
		return t, fmt.Errorf("refused: %s is a name the files provider keeps for its writes", clean)
	}
	if opened && p.linkProofOpen {
		// The caller's openBeneath refuses a symlink anywhere on the path
		// (ELOOP) and a missing component (ENOENT), each described as the
		// walk would.
		return t, nil
	}
	// Walk the components with Lstat: a symlink anywhere, even one that stays
	// inside the root, is refused.
	parts := strings.Split(t.rel, "/")
	for i := range parts {
		if t.rel == "." {
			break
		}
		name := strings.Join(parts[:i+1], "/")
		fi, err := p.root.Lstat(name)
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) && (!mustExist && i == len(parts)-1) {
				break
			}
			return t, describe(t.display, err)
		}
		if fi.Mode()&fs.ModeSymlink != 0 {
			return t, fmt.Errorf("refused: %s is a symbolic link; links are not followed", "/"+name)
		}
	}
	return t, nil
}

func describe(display string, err error) error {
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("not found: %s", display)
	case errors.Is(err, fs.ErrPermission):
		return fmt.Errorf("permission denied: %s", display)
	case errors.Is(err, syscall.ELOOP):
		return fmt.Errorf("refused: %s is a symbolic link; links are not followed", display)
	case errors.Is(err, syscall.ENOTDIR):
		return fmt.Errorf("not found: %s (a parent is not a directory)", display)
	case errors.Is(err, syscall.EAGAIN):
		return fmt.Errorf("busy: %s is leased by another process", display)
	default:
		// os.Root's escape error and anything unexpected: say no more than
		// that the path is unusable; never echo host paths.
		return fmt.Errorf("refused: %s is outside the provider's root or unusable", display)
	}
}

// openRead opens t for reading. O_NONBLOCK makes a FIFO (or a device) open
// at once instead of blocking the call; the caller refuses anything but a
// regular file from the returned FileInfo (fstat of the opened file, not
// of the name). A regular file with more than one hard link is refused:
// its other name may lie where the policy allows nothing.
func (p *Provider) openRead(t target) (*os.File, fs.FileInfo, error) {
	f, err := p.openBeneath(t.rel, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, nil, describe(t.display, err)
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, nil, describe(t.display, err)
	}
	if fi.Mode().IsRegular() && hardLinked(fi) {
		f.Close()
		return nil, nil, fmt.Errorf("refused: %s has other hard links; it is not read", t.display)
	}
	return f, fi, nil
}

// hardLinked reports whether the file fi describes has more than one name.
func hardLinked(fi fs.FileInfo) bool {
	st, ok := fi.Sys().(*syscall.Stat_t)
	return ok && uint64(st.Nlink) > 1
}

func (p *Provider) read(args []byte) (string, error) {
	var a struct {
		Path *string `json:"path"`
	}
	if err := decode(args, &a); err != nil {
		return "", err
	}
	if a.Path == nil {
		return "", errors.New("invalid arguments: path is required")
	}
	t, err := p.resolve("path", *a.Path, true, true)
	if err != nil {
		return "", err
	}
	f, fi, err := p.openRead(t)
	if err != nil {
		return "", err
	}
	defer f.Close()
	if fi.IsDir() {
		return "", fmt.Errorf("is a directory: %s", t.display)
	}
	if !fi.Mode().IsRegular() {
		return "", fmt.Errorf("not a regular file: %s", t.display)
	}
	if fi.Size() > MaxFileBytes {
		return "", fmt.Errorf("too large: %s is %d bytes (limit %d)", t.display, fi.Size(), MaxFileBytes)
	}
	b, err := io.ReadAll(io.LimitReader(f, MaxFileBytes+1))
	if err != nil {
		return "", describe(t.display, err)
	}
	if len(b) > MaxFileBytes {
		return "", fmt.Errorf("too large: %s (limit %d bytes)", t.display, MaxFileBytes)
	}
	if !utf8.Valid(b) {
		return "", fmt.Errorf("not a UTF-8 text file: %s", t.display)
	}
	return string(b), nil
}

func (p *Provider) search(ctx context.Context, args []byte) (string, error) {
	var a struct {
		Query *string          `json:"query"`
		Path  *string          `json:"path"`
		Limit *json.RawMessage `json:"limit"`
	}
	if err := decode(args, &a); err != nil {
		return "", err
	}
	switch {
	case a.Query == nil || *a.Query == "":
		return "", errors.New("invalid arguments: query is required and must not be empty")
	case utf8.RuneCountInString(*a.Query) > maxQueryChars:
		return "", fmt.Errorf("invalid arguments: query is longer than %d characters", maxQueryChars)
	case a.Path == nil:
		return "", errors.New("invalid arguments: path is required")
	}
	limit := DefaultSearchLimit
	if a.Limit != nil {
		n, ok := wholeNumber(*a.Limit, 1, MaxSearchLimit)
		if !ok {
			return "", fmt.Errorf("invalid arguments: limit must be a whole number between 1 and %d", MaxSearchLimit)
		}
		limit = n
	}
	t, err := p.resolve("path", *a.Path, true, false)
	if err != nil {
		return "", err
	}
	var matches, unread []string
	truncated := false
	fsys := p.walk
	if fsys == nil {
		fsys = beneathFS{p}
	}
	// fs.WalkDir reports links as entries without following them; they are
	// skipped like everything that is not a regular file. A directory
	// below the one searched that cannot be read (or that a link or a FIFO
	// replaced after its parent was listed) is skipped and named, not the
	// end of the search.
	walkErr := fs.WalkDir(fsys, t.rel, func(name string, d fs.DirEntry, err error) error {
		if err != nil {
			if name == t.rel || d == nil || !d.IsDir() || ctx.Err() != nil {
				return err
			}
			unread = append(unread, path.Join("/", name))
			return fs.SkipDir
		}
		if cerr := ctx.Err(); cerr != nil {
			return cerr
		}
		if !d.Type().IsRegular() || strings.HasPrefix(d.Name(), tempPrefix) {
			return nil
		}
		found, err := p.searchFile(name, *a.Query, limit-len(matches))
		if err != nil {
			// A file that cannot be searched (refused, larger than
			// MaxFileBytes, failing its read) is skipped and named like
			// such a directory: "no matches" would say it holds none.
			unread = append(unread, path.Join("/", name))
			return nil
		}
		matches = append(matches, found...)
		if len(matches) >= limit {
			truncated = true
			return fs.SkipAll
		}
		return nil
	})
	if walkErr != nil {
		if ctx.Err() != nil {
			return "", ctx.Err()
		}
		return "", describe(t.display, walkErr)
	}
	out := strings.Join(matches, "\n")
	if len(matches) == 0 {
		out = fmt.Sprintf("no matches for %q under %s", *a.Query, t.display)
	}
	if truncated {
		out += fmt.Sprintf("\n(stopped at %d matches)", limit)
	}
	if len(unread) > 0 {
		const shown = 5
		out += fmt.Sprintf("\n(not searched, unreadable: %s", strings.Join(unread[:min(len(unread), shown)], ", "))
		if len(unread) > shown {
			out += fmt.Sprintf(" and %d more", len(unread)-shown)
		}
		out += ")"
	}
	return out, nil
}

// beneathFS is the file system files.search walks: every name is opened
// with openBeneath, as the files the search reads are, never through the
// os.Root's own open. That open follows a link that stays inside the root
// (a directory swapped for a link to /private after its parent was listed
// would be listed) and blocks on a FIFO swapped in for a directory until a
// writer comes, past the call's deadline and holding a thread. Here a
// directory is opened with O_DIRECTORY | O_NONBLOCK: a link is refused
// (ELOOP), anything else but a directory at once (ENOTDIR).
type beneathFS struct{ p *Provider }

var (
	_ fs.ReadDirFS = beneathFS{}
	_ fs.StatFS    = beneathFS{}
)

// Open opens name without blocking (a FIFO opens at once).
func (b beneathFS) Open(name string) (fs.File, error) {
	return b.open("open", name, os.O_RDONLY|syscall.O_NONBLOCK)
}

// Stat describes what name is when opened (fstat), not what a link there
// points to; it is asked only of the directory or file searched.
func (b beneathFS) Stat(name string) (fs.FileInfo, error) {
	f, err := b.open("stat", name, os.O_RDONLY|syscall.O_NONBLOCK)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return f.Stat()
}

// ReadDir lists the directory name, sorted by name as fs.WalkDir expects.
func (b beneathFS) ReadDir(name string) ([]fs.DirEntry, error) {
	f, err := b.open("readdir", name, os.O_RDONLY|syscall.O_DIRECTORY|syscall.O_NONBLOCK)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	ents, err := f.ReadDir(-1)
	slices.SortFunc(ents, func(x, y fs.DirEntry) int { return strings.Compare(x.Name(), y.Name()) })
	return ents, err
}

func (b beneathFS) open(op, name string, flag int) (*os.File, error) {
	if !fs.ValidPath(name) {
		return nil, &fs.PathError{Op: op, Path: name, Err: fs.ErrInvalid}
	}
	return b.p.openBeneath(name, flag, 0)
}

func (p *Provider) searchFile(name, query string, max int) ([]string, error) {
	f, fi, err := p.openRead(target{display: "/" + name, rel: name})
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if !fi.Mode().IsRegular() { // swapped in after the walk listed it (a FIFO would block the read)
		return nil, errors.New("not a regular file")
	}
	if fi.Size() > MaxFileBytes {
		return nil, errors.New("too large")
	}
	var out []string
	sc := bufio.NewScanner(io.LimitReader(f, MaxFileBytes))
	// The buffer may hold one byte more than the file: a line of the whole
	// MaxFileBytes fills a buffer of that size before the scanner sees the
	// end of the file, and it would stop there with ErrTooLong.
	sc.Buffer(make([]byte, 0, 64<<10), MaxFileBytes+1)
	for line := 1; sc.Scan() && len(out) < max; line++ {
		text := sc.Text()
		if !strings.Contains(text, query) {
			continue
		}
		if len(text) > maxLineBytes {
			text = strings.ToValidUTF8(text[:maxLineBytes], "") + "…"
		}
		out = append(out, fmt.Sprintf("%s:%d: %s", path.Join("/", name), line, text))
	}
	return out, sc.Err()
}

func (p *Provider) write(args []byte) (string, error) {
	var a struct {
		Path    *string `json:"path"`
		Content *string `json:"content"`
	}
	if err := decode(args, &a); err != nil {
		return "", err
	}
	switch {
	case a.Path == nil:
		return "", errors.New("invalid arguments: path is required")
	case a.Content == nil:
		return "", errors.New("invalid arguments: content is required")
	case len(*a.Content) > MaxFileBytes:
		return "", fmt.Errorf("invalid arguments: content is longer than %d bytes", MaxFileBytes)
	}
	t, err := p.resolve("path", *a.Path, false, false)
	if err != nil {
		return "", err
	}
	if t.rel == "." {
		return "", fmt.Errorf("is a directory: %s", t.display)
	}
	n, err := p.replace(t, *a.Content)
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("wrote %d bytes to %s", n, t.display), nil
}
