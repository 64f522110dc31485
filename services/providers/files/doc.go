// Package files is the reference tool provider: a ToolHandlerService serving
// files.read, files.search and files.write over a root directory that holds
// /public and /private.
//
// The provider authorizes nothing (the kernel does, before it calls Handle)
// but it trusts nothing either. Every path argument is cleaned again with the
// same POSIX rule the kernel used to build the authorized resource, and the
// file is reached through an os.Root, which refuses any path that would
// leave the root. Symbolic links are refused outright, even ones that stay
// inside the root: the policy decided on the lexical path, and a link under
// /public that points into /private would make the handler touch an object
// nobody authorized. Each path component is checked with Lstat and the last
// one is opened with O_NOFOLLOW; a link swapped in between those two steps
// can at worst lead elsewhere inside the root, never outside it.
//
// Tool-level failures (no such file, a directory, a refused link, bad
// arguments) are answered as MCP tool errors (is_error); a gRPC error means
// the request itself was wrong (an unknown tool).
package files
