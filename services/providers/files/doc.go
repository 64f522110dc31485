// Package files is the reference tool provider: a ToolHandlerService serving
// files.read, files.search and files.write over a root directory that holds
// /public and /private.
//
// The provider authorizes nothing (the kernel does, before it calls Handle)
// but it trusts nothing either. Every path argument is cleaned again with the
// same POSIX rule the kernel used to build the authorized resource, and the
// file is opened beneath the root directory, never outside it (files.search
// lists each directory it walks the same way). Symbolic links are refused
// outright, even ones that stay inside the root: the policy decided on the
// lexical path, and a link under /public that points into /private would
// make the handler touch an object nobody authorized.
// On Linux the open itself refuses a link on any component — openat2 with
// RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS, or, where openat2 does not work,
// one openat with O_NOFOLLOW per component — so a link swapped in after a
// check is refused too. Elsewhere the file is reached through an os.Root,
// each component checked with Lstat first and the last opened with
// O_NOFOLLOW: a link swapped in between can at worst lead elsewhere inside
// the root, never outside it.
//
// Tool-level failures (no such file, a directory, a refused link, bad
// arguments) are answered as MCP tool errors (is_error); a gRPC error means
// the request itself was wrong (an unknown tool).
package files
